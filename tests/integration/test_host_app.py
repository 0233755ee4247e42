"""Many tasks in one Spark application (task_runtime shared, tasks/runtime/shared.py), on the real
broker and Spark: every task of the host is a thread of one process serving every chat API on
one port; a task with a bad spec fails alone; a killed task is fenced at once and replaced;
the application SIGKILLed loses its tasks, which are replaced in a new one; every record is
published exactly once throughout."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic, produce
from supervisor.testkit.service import RunningService, db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tasks import procfs
from tasks.protocol import TOKEN_HEADER

BASE = "/druid/indexer/v1/supervisor"


def words(topic_prefix: str, kafka: LocalKafka, count: int, partitions: int = 1) -> str:
    topic = f"{topic_prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, partitions)
    more(kafka, topic, count, partitions)
    return topic


def more(kafka: LocalKafka, topic: str, count: int, partitions: int = 1) -> None:
    for p in range(partitions):
        records = [
            (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": f"w{p}-{i}"}).encode())
            for i in range(count)
        ]
        produce(kafka.bootstrap_servers, topic, records, partition=p)


def spec(ds: str, topic: str, kafka: LocalKafka, **io: Any) -> dict[str, Any]:
    tuning = io.pop("tuning", None)
    return supervisor_spec(
        ds,
        topic,
        kafka.bootstrap_servers,
        ["word"],
        segment_granularity="DAY",
        tuning=tuning,
        period="PT1S",
        taskDuration="PT1H",
        **io,
    )


def tasks_of(service: RunningService, ds: str) -> list[Any]:
    return db_rows(
        service, select(TaskRow).where(TaskRow.datasource == ds).order_by(TaskRow.created_at)
    )


def published_rows(service: RunningService, ds: str) -> int:
    segments = db_rows(
        service,
        select(SegmentRow).where(SegmentRow.datasource == ds, SegmentRow.used.is_(True)),
    )
    return sum(s.num_rows for s in segments)


def chat_status(row: Any) -> int:
    url = f"http://127.0.0.1:{row.location_port}/druid/worker/v1/chat/{row.id}/status"
    return httpx.get(url, headers={TOKEN_HEADER: row.token}, timeout=10).status_code


def app_pid(service: RunningService) -> int:
    saved = json.loads((service.settings.work_dir / "host-app" / "app.json").read_text())
    return int(saved["pid"])


def handoff(api: httpx.Client, ds: str) -> None:
    answer = api.post(f"{BASE}/{ds}/taskGroups/handoff", json={"taskGroupIds": [0]})
    assert answer.is_success, answer.text


def test_tasks_share_one_application_fail_alone_and_publish_exactly_once(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    good = words("shared-good", kafka, 40, partitions=2)
    other = words("shared-other", kafka, 30)
    bad = f"shared-bad-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, bad, 1)
    produce(kafka.bootstrap_servers, bad, [(None, b"not json")] * 5)
    with overlord_with_tasks(tmp_path, jar_cache, "local[2]", task_runtime="shared") as (
        service,
        api,
    ):
        assert api.post(BASE, json=spec("good", good, kafka, replicas=2)).is_success
        assert api.post(BASE, json=spec("other", other, kafka)).is_success
        failing = spec("bad", bad, kafka, tuning={"maxParseExceptions": 0})
        assert api.post(BASE, json=failing).is_success

        # the bad spec's task fails on its own records, and only it
        failed = wait_for(
            lambda: [t for t in tasks_of(service, "bad") if t.status == "FAILED"],
            300,
            "the bad supervisor's task to fail",
        )
        assert "Max parse exceptions" in failed[0].error_msg
        wait_for(lambda: len(tasks_of(service, "good")) == 2, 120, "two replicas")
        for ds, count in (("good", 80), ("other", 30)):
            wait_for(
                lambda ds=ds, count=count: (
                    _read(tasks_of(service, ds)) == [count] * (2 if ds == "good" else 1)
                ),
                300,
                f"{ds}'s tasks to read its {count} records",
            )

        # one application: one process, one port, every chat API on it
        pid = app_pid(service)
        assert procfs.with_marker(b"tasks.host_app") == [pid]
        assert procfs.with_marker(b"-m\x00tasks\x00") == []  # no task process of its own
        running = [*tasks_of(service, "good"), *tasks_of(service, "other")]
        assert {t.location_port for t in running} == {running[0].location_port}
        assert all(chat_status(t) == 200 for t in running)
        # the chat API tells a caller without a task's token nothing, not even that it runs
        chat = f"http://127.0.0.1:{running[0].location_port}/druid/worker/v1/chat"
        refusals = [
            httpx.get(f"{chat}/{task}/status", headers={TOKEN_HEADER: token}, timeout=10)
            for task, token in (
                (running[0].id, "wrong"),
                (running[0].id, running[1].token),
                ("index_kafka_nobody_0", running[0].token),
                ("index_kafka_nobody_0", "wrong"),
            )
        ]
        assert {(r.status_code, r.text) for r in refusals} == {
            (403, '{"error":"missing or wrong task token"}')
        }

        # a handoff: both replicas stop at the same offsets, one publishes, the successor
        # starts in the same application
        handoff(api, "good")
        wait_for(lambda: published_rows(service, "good") == 80, 300, "good's 80 rows")
        more(kafka, good, 10, partitions=2)
        successors = wait_for(
            lambda: [t for t in tasks_of(service, "good") if t.status == "RUNNING"][:2],
            120,
            "good's successors",
        )
        assert all(t.location_port == running[0].location_port for t in successors)
        wait_for(lambda: _read(successors) == [20, 20], 300, "the successors to read 20 each")

        # a killed task is fenced at once (its chat API is gone) and replaced from its start
        victim = successors[0]
        assert api.post(f"/druid/indexer/v1/task/{victim.id}/shutdown").is_success
        wait_for(lambda: chat_status(victim) == 403, 60, "the killed task's chat API to go")
        wait_for(
            lambda: len(tasks_of(service, "good")) >= 5, 120, "a replacement for the killed task"
        )
        handoff(api, "good")
        wait_for(lambda: published_rows(service, "good") == 100, 300, "good's 100 rows")

        # the application SIGKILLed: its tasks fail, a new application runs their replacements
        before = {t.id for t in tasks_of(service, "other")}
        os.killpg(pid, signal.SIGKILL)
        wait_for(
            lambda: [t for t in tasks_of(service, "other") if t.id not in before],
            120,
            "other's replacement",
        )
        assert app_pid(service) != pid
        more(kafka, other, 5)
        handoff(api, "other")
        wait_for(lambda: published_rows(service, "other") == 35, 300, "other's 35 rows")
        assert published_rows(service, "good") == 100
        assert published_rows(service, "bad") == 0
    assert procfs.with_marker(b"tasks.host_app") == []  # gone with the service (kill_tasks_on_exit)


def _read(rows: list[Any]) -> list[int]:
    """Records each task has read, by its live row counts (its chat API); -1: no answer."""
    counts = []
    for row in rows:
        url = f"http://127.0.0.1:{row.location_port}/druid/worker/v1/chat/{row.id}/rowStats"
        try:
            answer = httpx.get(url, headers={TOKEN_HEADER: row.token}, timeout=10)
        except httpx.HTTPError:
            counts.append(-1)
            continue
        if answer.status_code != 200:
            counts.append(-1)
            continue
        counts.append(int(answer.json()["totals"]["buildSegments"]["processed"]))
    return counts


def test_the_application_starts_with_the_first_supervisor_and_an_idle_one_stops_with_the_overlord(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    """An overlord with no supervisor holds no Spark application; its first supervisor starts
    one (before any task needs it), its JVM's heap taken whole at start (task_fixed_heap); when
    the overlord stops, an application that runs no task stops too (tasks outlive the
    overlord, an idle application does not)."""
    from supervisor.runner.files import process_alive
    from supervisor.testkit.service import task_settings

    topic = words("lazy", kafka, 10)
    body = spec("lazy", topic, kafka)
    body["suspended"] = True  # a supervisor that starts no task
    settings = task_settings(
        tmp_path, jar_cache, task_runtime="shared", task_driver_memory="640m", task_malloc_arenas=3
    )
    saved = settings.work_dir / "host-app" / "app.json"
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30) as api,
    ):
        wait_for(lambda: api.get("/druid/indexer/v1/isLeader").status_code == 200, 30, "lead")
        time.sleep(1)
        assert not saved.exists()  # leading, no supervisor: no application
        assert api.post(BASE, json=body).status_code == 200
        pid = wait_for(lambda: saved.exists() and app_pid(service), 120, "the application")
        assert process_alive(pid, b"tasks.host_app")
        assert not tasks_of(service, "lazy")
        # its driver JVM: the whole heap from the start, each page of it resident
        jvm = wait_for(lambda: _java_child(pid), 120, "the application's JVM")
        options = (Path("/proc") / str(jvm) / "cmdline").read_bytes().split(b"\0")
        assert {b"-Xmx640m", b"-Xms640m", b"-XX:+AlwaysPreTouch"} <= set(options)
        # and its malloc arenas bounded (unless this environment sets a bound of its own)
        environ = (Path("/proc") / str(jvm) / "environ").read_bytes().split(b"\0")
        arenas = os.environ.get("MALLOC_ARENA_MAX", "3")
        assert f"MALLOC_ARENA_MAX={arenas}".encode() in environ
        wait_for(lambda: _resident_mib(jvm) > 640, 60, "the heap's pages to be resident")
    assert not process_alive(pid, b"tasks.host_app")


def _java_child(parent: int) -> int | None:
    """The JVM `parent` started (spark-submit's script becomes it once it has its command)."""
    for pid in procfs.with_marker(b"org.apache.spark.deploy.SparkSubmit"):
        try:
            program = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if procfs.parent(pid) == parent and program.endswith(b"java"):
            return pid
    return None


def _resident_mib(pid: int) -> float:
    status = (Path("/proc") / str(pid) / "status").read_text()
    return (
        int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
        / 1024
    )
