"""Nothing orphaned for long (tasks/runtime/orphan.py), on the real broker and Spark: once the
overlord that drove them is gone for good, a host application and a task process that no
overlord calls for the orphan timeout stop their tasks without publishing and exit; a task
process told SIGTERM with no overlord to publish to ends within its bound."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic, produce
from supervisor.runner.files import process_alive, read_report
from supervisor.testkit.service import RunningService, db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tasks.protocol import TaskState
from tasks.runtime.orphan import SIGTERM_BOUND_S
from tasks.spark import scratch

BASE = "/druid/indexer/v1/supervisor"
ORPHAN_TIMEOUT_S = 6.0


def _topic(kafka: LocalKafka, count: int) -> str:
    topic = f"orphans-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 1)
    records = [
        (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": f"w{i}"}).encode())
        for i in range(count)
    ]
    produce(kafka.bootstrap_servers, topic, records)
    return topic


def _reading(service: RunningService, ds: str) -> TaskRow:
    def found() -> TaskRow | None:
        rows = db_rows(service, select(TaskRow).where(TaskRow.datasource == ds))
        located = [r for r in rows if r.status == "RUNNING" and r.location_port]
        return located[0] if located else None

    return wait_for(found, 180, f"{ds}'s task to run")


def _pid(work: Path, runtime: str, task_id: str) -> int:
    if runtime == "shared":
        return int(json.loads((work / "host-app" / "app.json").read_text())["pid"])
    return int((work / "tasks" / task_id / "pid").read_text())


def _gone(pid: int) -> bool:
    return not process_alive(pid, b"tasks")


@pytest.mark.parametrize("runtime", ["shared", "process"])
def test_without_an_overlord_tasks_stop_unpublished_and_their_processes_exit(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path, runtime: str
) -> None:
    work = tmp_path / "work"
    pids: dict[str, int] = {}
    try:
        with overlord_with_tasks(
            tmp_path,
            jar_cache,
            "local[1]",
            task_runtime=runtime,
            kill_tasks_on_exit=False,  # the overlord goes for good and leaves them
            orphan_timeout_s=ORPHAN_TIMEOUT_S,
        ) as (service, api):
            for ds in ("left", "termed"):
                spec = supervisor_spec(
                    ds,
                    _topic(kafka, 20),
                    kafka.bootstrap_servers,
                    ["word"],
                    segment_granularity="DAY",
                    period="PT1S",
                    taskDuration="PT1H",
                )
                assert api.post(BASE, json=spec).is_success
            rows = {ds: _reading(service, ds) for ds in ("left", "termed")}
            # driven, a task outlives many orphan timeouts: its overlord calls it every pass
            time.sleep(2 * ORPHAN_TIMEOUT_S)
            assert all(r.status == "RUNNING" for r in db_rows(service, select(TaskRow)))
            pids = {ds: _pid(work, runtime, row.id) for ds, row in rows.items()}
        stopped = time.monotonic()
        assert not any(_gone(pid) for pid in pids.values())  # the overlord left them running

        if runtime == "process":  # SIGTERM: a graceful stop, but no overlord takes its publish
            os.kill(pids["termed"], signal.SIGTERM)
            wait_for(lambda: _gone(pids["termed"]), SIGTERM_BOUND_S + 5, "the SIGTERMed task")
        wait_for(
            lambda: all(_gone(pid) for pid in pids.values()),
            ORPHAN_TIMEOUT_S + SIGTERM_BOUND_S + 15,
            "the orphaned tasks' processes to exit",
        )
        assert time.monotonic() - stopped >= ORPHAN_TIMEOUT_S - 1  # not before their timeout
        orphaned = [rows["left"]] if runtime == "process" else list(rows.values())
        for row in orphaned:
            report = read_report(work / "tasks" / row.id)
            assert report is not None and report.status is TaskState.FAILED
            assert "no overlord called" in (report.errorMsg or ""), report.errorMsg
        published = db_rows(service, select(SegmentRow))
        assert published == []  # nothing published without an overlord
        # Spark's scratch went with each process that ended on its own (the SIGTERMed one's
        # bound cut it short: its folder goes when the next application claims the place)
        root = Path(os.environ.get("SPARK_LOCAL_DIRS") or tmp_path)
        ended = [pids["left"]] if runtime == "process" else list(set(pids.values()))
        assert not [pid for pid in ended if (root / f"{scratch.PREFIX}{pid}").exists()]
    finally:
        for pid in pids.values():
            if not _gone(pid):
                os.killpg(pid, signal.SIGKILL)
