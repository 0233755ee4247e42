"""The supervisor end to end, on a real broker, Spark and metadata DB, with the overlord as a
process of its own (so it can be SIGKILLed and restarted).

A producer writes numbered records to a 3-partition topic without pause; the supervisor runs
taskCount 2, replicas 2. The scenarios run one after another on the same supervisor, and
after each the published segments are checked: per partition, the published offsets are
exactly the offsets below the committed one, once each, except for the ranges a reset or a
resetOffsets told the supervisor to skip.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic
from supervisor.testkit.numbers import Numbers
from supervisor.testkit.overlord import Overlord
from supervisor.testkit.waits import wait_for
from tests.e2e.harness import (
    BASE,
    LONG,
    VERIFY,
    Run,
    ended_at,
    generations,
)

SID = "numbers"


def spec(topic: str, bootstrap: str, **io: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "period": "PT2S",
        "completionTimeout": "PT5M",
        "repartitionTransitionDuration": "PT10S",
        "taskCount": 2,
        "replicas": 2,
        "taskDuration": "PT10S",
        **io,
    }
    return supervisor_spec(
        SID,
        topic,
        bootstrap,
        [{"type": "long", "name": "n"}],
        metrics=[{"type": "count", "name": "count"}],
        tuning={"maxRowsInMemory": 5000},
        **settings,
    )


@pytest.fixture(params=["shared", pytest.param("process", marks=pytest.mark.long)])
def run(
    request: pytest.FixtureRequest, kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> Iterator[Run]:
    """The scenarios with every task a thread of one shared application (where SIGKILLing a
    task's process takes every task of the host with it), and (`make test-long`) with a task
    process each."""
    topic = f"numbers-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 3)
    overlord = Overlord(tmp_path, jar_cache, runtime=request.param)
    overlord.start()
    ledger = Numbers(kafka.bootstrap_servers, [topic], rate=40).start()
    try:
        with httpx.Client(
            base_url=overlord.url, timeout=30, auth=overlord.auth, verify=VERIFY
        ) as api:
            yield Run(overlord, ledger, api, topic)
    finally:
        ledger.stop()
        overlord.stop()


@pytest.mark.timeout(3600)
def test_every_scenario_publishes_each_record_exactly_once(run: Run, kafka: LocalKafka) -> None:
    api, topic = run.api, run.topic
    assert api.post(BASE, json=spec(topic, kafka.bootstrap_servers)).json() == {"id": SID}

    # 1. three rollovers in a row per group, successors reading before predecessors publish
    wait_for(
        lambda: all(len(generations(run, g)) >= 3 for g in (0, 1)), LONG, "3 rollovers per group"
    )
    wait_for(lambda: run.committed() and run.check(), LONG, "a consistent published state")
    tasks = run.tasks()
    ended = {t.id: t for t in tasks if t.end and t.status == "SUCCESS"}
    overlapping = [
        t
        for t in tasks
        for p in ended.values()
        if t.group == p.group and t.start == p.end and t.created_at < ended_at(run, p.id)
    ]
    assert overlapping, "no successor started before its predecessor published"

    # 2. SIGKILL the overlord and restart it: every task is adopted, none is killed
    run.reading_now(0, 2)
    run.reading_now(1, 2)
    alive = [t.id for t in run.tasks() if t.status == "RUNNING"]
    run.overlord.kill9()
    time.sleep(3)
    run.overlord.start()
    wait_for(
        lambda: all(t.status != "RUNNING" for t in run.tasks() if t.id in alive),
        LONG,
        "the adopted tasks to finish",
    )
    assert {t.id: t.status for t in run.tasks() if t.id in alive} == dict.fromkeys(alive, "SUCCESS")
    run.check()

    # 3. partitions added mid-run: partition 3 joins group 1 from its earliest offset
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    wait_for(lambda: run.committed().get("3", 0) > 0, LONG, "partition 3 to be published")
    run.check()

    # 4. suspend: every group publishes and stops; resume: reading goes on from there
    assert api.post(f"{BASE}/{SID}/suspend").status_code == 200
    wait_for(lambda: all(t.status != "RUNNING" for t in run.tasks()), LONG, "all tasks to end")
    suspended_at = run.check()
    assert api.post(f"{BASE}/{SID}/resume").status_code == 200
    for group in (0, 1):
        resumed = run.reading_now(group, 2)[0]
        assert all(resumed.start[p] == suspended_at[p] for p in resumed.start)

    # 5. a spec update rolls every group over gracefully
    updated = spec(topic, kafka.bootstrap_servers, taskDuration="PT10M", useEarliestOffset=False)
    assert api.post(BASE, json=updated).status_code == 200
    old = {t.version for t in run.tasks()}
    wait_for(
        lambda: all(t.status != "RUNNING" for t in run.tasks() if t.version in old),
        LONG,
        "the old version's tasks to publish",
    )
    run.reading_now(0, 2)
    run.reading_now(1, 2)
    run.check()

    # 6. early handoff of group 0 (taskDuration is 10 minutes now)
    start = run.reading(0)[0].start
    assert api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0]}).is_success
    wait_for(lambda: run.succeeded_from(0, start), LONG, "group 0 to hand off")
    assert not [t for t in run.tasks() if t.group == 1 and t.version not in old and t.end]
    run.check()

    # 7. SIGKILL one replica mid-read (taskDuration is long now, so no rollover is under way):
    # it is replaced from the same start offsets (in a shared application, its sibling too)
    victim, sibling = run.reading_now(0, 2)
    run.kill9(victim)
    replaced = 1 if run.overlord.runtime == "process" else 2

    def replacements() -> list[Any]:
        found = [
            t
            for t in run.tasks()
            if t.start == victim.start and t.id not in (victim.id, sibling.id)
        ]
        return found if len(found) >= replaced else []

    replacement = wait_for(replacements, LONG, "replacement replicas from the same offsets")
    assert replacement[0].group == 0 and len(replacement) == replaced
    run.reading_now(0, 2)
    assert api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0]}).is_success
    wait_for(lambda: run.succeeded_from(0, victim.start), LONG, "the group to publish")
    run.check()

    # 8. SIGKILL a whole group: it restarts from the same offsets
    victims = run.reading_now(1, 2)
    for victim in victims:
        run.kill9(victim)
    start = victims[0].start
    wait_for(
        lambda: len([t for t in run.tasks() if t.start == start]) == 4,
        LONG,
        "the group to be restarted",
    )
    run.reading_now(1, 2)
    assert api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [1]}).is_success
    wait_for(lambda: run.succeeded_from(1, start), LONG, "the restarted group to publish")
    run.check()

    # 9. resetOffsets: partition 0 skips ahead; its group restarts there
    target = run.ledger.next_offset("0")
    run.restarts.setdefault("0", set()).add(target)
    before = {t.id for t in run.tasks()}
    reset_at = datetime.now(UTC)
    body = {
        "type": "kafka",
        "partitions": {"type": "end", "stream": topic, "partitionOffsetMap": {"0": target}},
    }
    assert api.post(f"{BASE}/{SID}/resetOffsets", json=body).is_success
    restarted = wait_for(
        lambda: [t for t in run.reading_now(0, 2) if t.id not in before and t.start["0"] >= target],
        LONG,
        "a restart",
    )
    assert restarted[0].start["0"] == target
    run.excuse_failures_since(reset_at)
    handoff_until(
        api, [0], lambda: run.committed()["0"] > target, "partition 0 to publish past the reset"
    )
    run.check()

    # 10. reset: committed offsets forgotten, tasks killed; reading restarts at the latest
    before = {t.id for t in run.tasks()}
    latest = {key: run.ledger.next_offset(key) for key in run.committed()}
    reset_at = datetime.now(UTC)
    assert api.post(f"{BASE}/{SID}/reset").is_success
    for group in (0, 1):
        # The restarted tasks start at or past what was produced before the reset; tasks the
        # reset kills (a successor created as it was asked, too) may answer READING a moment.
        fresh = wait_for(
            lambda group=group: [
                t
                for t in run.reading_now(group, 2)
                if t.id not in before and all(t.start[k] >= latest[k] for k in t.start)
            ],
            LONG,
            f"group {group} to be restarted",
        )
        for key, offset in fresh[0].start.items():
            run.restarts.setdefault(key, set()).add(offset)
    run.excuse_failures_since(reset_at)
    handoff_until(
        api, [0, 1], lambda: len(run.committed()) == 4, "all partitions to publish after reset"
    )
    run.check()

    # 11. terminate: every group publishes, the supervisor is gone
    assert api.post(f"{BASE}/{SID}/terminate").is_success
    wait_for(lambda: all(t.status != "RUNNING" for t in run.tasks()), LONG, "all tasks to end")
    assert api.get(f"{BASE}/{SID}").status_code == 404
    final = run.check()
    assert sum(final.values()) > 0
    # the only failures: the replicas this test SIGKILLed and the tasks the resets killed
    failed = [(t.id, t.error) for t in run.tasks() if t.status == "FAILED"]
    assert [(i, e) for i, e in failed if i not in run.expected_failures] == []


HANDOFF_AGAIN_S = 10.0


def handoff_until(
    api: httpx.Client, groups: list[int], done: Callable[[], bool], what: str
) -> None:
    """Hand the groups off until `done`: a handoff that reaches restarted tasks before their
    first batch publishes an empty range, which leaves the committed offsets as they were (the
    next publish would come a taskDuration later), so it is asked again every HANDOFF_AGAIN_S."""
    asked = [float("-inf")]

    def published() -> bool:
        if done():
            return True
        if time.monotonic() - asked[0] >= HANDOFF_AGAIN_S:
            api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": groups})
            asked[0] = time.monotonic()
        return False

    wait_for(published, LONG, what)
