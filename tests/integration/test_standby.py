"""Successors run on standby processes the runner started and warmed before the rollover."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic, produce
from tests.conftest import overlord_with_tasks, wait_for
from tests.integration.test_api_supervisors import db_rows

BASE = "/druid/indexer/v1/supervisor"


def words(first: int, count: int) -> list[tuple[None, bytes]]:
    return [
        (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": f"w{i}"}).encode())
        for i in range(first, first + count)
    ]


def test_successors_take_over_warm_standbys(
    kafka: LocalKafka, tmp_path: Path, jar_cache: Path
) -> None:
    topic, ds = f"standby-{uuid.uuid4().hex[:8]}", "standby"
    create_topic(kafka.bootstrap_servers, topic, 2)
    produce(kafka.bootstrap_servers, topic, words(0, 20), partition=0)
    produce(kafka.bootstrap_servers, topic, words(20, 20), partition=1)
    spec = supervisor_spec(
        ds, topic, kafka.bootstrap_servers, ["word"], period="PT1S", taskDuration="PT15S"
    )
    with overlord_with_tasks(tmp_path, jar_cache, "local[1]", task_runtime="process") as (
        service,
        api,
    ):
        runner = service.app.state.context.runner.local  # no task hosts: this host
        assert api.post(BASE, json=spec).is_success

        def rows() -> list[Any]:
            return db_rows(service, select(TaskRow).order_by(TaskRow.created_at))

        # the first generation starts cold; a standby is reserved for its successor
        wait_for(lambda: runner.standbys.describe(), 300, "a standby for group 0")
        slot = Path(runner.standbys.standbys[0].slot)
        started = (slot / "standby-token").stat().st_mtime
        # (a task row is recorded before its process starts: wait until it has a location)
        wait_for(
            lambda: len(rows()) >= 2 and rows()[1].log_path is not None,
            600,
            "the first rollover's successor to start",
        )
        first, second = rows()[:2]
        assert first.end_offsets == {"0": 20, "1": 20}
        assert first.rolled_at.replace(tzinfo=UTC).timestamp() > started  # warmed beforehand
        work = service.settings.work_dir.resolve() / "tasks"
        assert (work / second.id).resolve() == slot  # the successor is the standby process
        assert second.log_path == str(slot / "task.log")

        produce(kafka.bootstrap_servers, topic, words(40, 10), partition=0)
        wait_for(
            lambda: rows()[1].status == "SUCCESS", 600, "the standby-run generation to publish"
        )
        report = rows()[1].report
        assert report["standby"] is True and report["firstReadAt"] is not None
        assert isinstance(report["warmAtAssign"], bool)  # the handoff bench's breakdown
        assert datetime.fromisoformat(report["assignedAt"]) <= datetime.fromisoformat(
            report["firstReadAt"]
        )
        assert api.post(f"{BASE}/{ds}/terminate").is_success
        wait_for(lambda: all(r.status != "RUNNING" for r in rows()), 300, "the tasks to finish")
        segments = db_rows(service, select(SegmentRow).where(SegmentRow.used.is_(True)))
        assert sum(s.num_rows for s in segments) == 50  # every record once
        pids = [s.process for s in runner.standbys.standbys]
    assert runner.standbys.standbys == []  # the service stops standbys on its way out
    assert all(p.poll() is not None for p in pids)
