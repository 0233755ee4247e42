"""A topicPattern supervisor end to end, on a real broker, Spark and metadata DB: it reads
every topic whose whole name matches, groups partitions as Druid does (topic and partition
hashed), takes in a matching topic created mid-run, resets one topic's partition, and
publishes each record of the matching topics exactly once and nothing of the others."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from supervisor.controller.plan import groups_of
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic
from supervisor.testkit.numbers import Numbers
from supervisor.testkit.overlord import Overlord
from supervisor.testkit.waits import wait_for
from tasks.partitions import task_group
from tests.e2e.harness import BASE, LONG, VERIFY, Run, generations

SID = "multi"


@pytest.mark.timeout(2400)
def test_a_topic_pattern_publishes_each_matching_record_once(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    tag = uuid.uuid4().hex[:6]
    a, b, late, decoy = (f"mt{tag}-{suffix}" for suffix in ("a", "b", "c", "ab"))
    pattern = f"mt{tag}-[a-z]"  # "…-ab" matches its prefix only: not a whole-name match
    for topic, partitions in ((a, 2), (b, 1), (decoy, 1)):
        create_topic(bootstrap, topic, partitions)
    overlord = Overlord(tmp_path, jar_cache)
    overlord.start()
    ledger = Numbers(bootstrap, [a, b, decoy], rate=30, multi=True).start()
    try:
        with httpx.Client(
            base_url=overlord.url, timeout=30, auth=overlord.auth, verify=VERIFY
        ) as api:
            run = Run(overlord, ledger, api, pattern)
            body = supervisor_spec(
                SID,
                "",
                bootstrap,
                [{"type": "long", "name": "n"}],
                metrics=[{"type": "count", "name": "count"}],
                tuning={"maxRowsInMemory": 5000},
                topicPattern=pattern,
                period="PT2S",
                completionTimeout="PT5M",
                repartitionTransitionDuration="PT10S",
                taskCount=2,
                replicas=1,
                taskDuration="PT10S",
            )
            assert api.post(BASE, json=body).json() == {"id": SID}

            # 1. each group reads the partitions Druid assigns it, and rolls over twice
            keys = (f"{a}:0", f"{a}:1", f"{b}:0")
            groups = groups_of(keys, 2)
            wait_for(
                lambda: all(len(generations(run, g)) >= 2 for g in groups),
                LONG,
                "2 rollovers per group",
            )
            assert {t.group: sorted(t.start) for t in run.tasks()} == {
                g: sorted(str(k) for k in members) for g, members in groups.items()
            }
            wait_for(lambda: run.committed() and run.check(), LONG, "a consistent state")
            status = api.get(f"{BASE}/{SID}/status").json()["payload"]
            assert status["stream"] == pattern
            assert set(status["latestOffsets"]) == set(keys)

            # 2. a matching topic created mid-run joins from its earliest offset
            create_topic(bootstrap, late, 1)
            ledger.add_topic(late)
            wait_for(
                lambda: run.committed().get(f"{late}:0", 0) > 0, LONG, f"{late} to be published"
            )
            run.check()

            # 3. resetOffsets moves one topic's partition ahead; its group restarts there
            key = f"{a}:0"
            target = ledger.next_offset(key)
            run.restarts.setdefault(key, set()).add(target)
            group = task_group(key, 2)
            before = {t.id for t in run.tasks()}
            reset_at = datetime.now(UTC)
            reset = {
                "type": "kafka",
                "partitions": {
                    "type": "end",
                    "stream": pattern,
                    "partitionOffsetMap": {key: target},
                },
            }
            assert api.post(f"{BASE}/{SID}/resetOffsets", json=reset).is_success
            restarted = wait_for(
                lambda: [t for t in run.reading_now(group, 1) if t.id not in before],
                LONG,
                "the group to restart",
            )
            assert restarted[0].start[key] == target
            run.excuse_failures_since(reset_at)
            wait_for(
                lambda: run.committed()[key] > target, LONG, f"{key} to publish past the reset"
            )
            run.check()

            # 4. terminate: everything read is published; the decoy topic never was
            assert api.post(f"{BASE}/{SID}/terminate").is_success
            wait_for(lambda: all(t.status != "RUNNING" for t in run.tasks()), LONG, "tasks to end")
            final = run.check()
            assert set(final) == {*keys, f"{late}:0"}
            assert all(final[k] > 0 for k in final)
            failed = [(t.id, t.error) for t in run.tasks() if t.status == "FAILED"]
            assert [(i, e) for i, e in failed if i not in run.expected_failures] == []
    finally:
        ledger.stop()
        overlord.stop()
