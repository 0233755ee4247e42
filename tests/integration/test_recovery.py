"""A restarted service settles the tasks an earlier one left RUNNING: a process still alive is
adopted (watched, killable), one that ended meanwhile is recorded from its report."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

from sqlalchemy import select

from supervisor.db.engine import make_engine, migrate, session_factory
from supervisor.db.models import TaskRow
from supervisor.runner.local import LocalProcessRunner
from supervisor.settings import Settings
from supervisor.testkit.service import RunningService, db_rows


def left_running(settings: Settings, task_id: str) -> None:
    engine = make_engine(settings.metadata_url)
    migrate(engine)
    now = datetime.now(UTC)
    with session_factory(engine)() as session:
        session.add(
            TaskRow(
                id=task_id,
                type="index_kafka",
                supervisor_id=None,
                datasource="ds",
                payload={"id": task_id},
                status="RUNNING",
                created_at=now,
                updated_at=now,
                location_host="127.0.0.1",  # its launch was recorded
                location_port=1,
                token="t",
            )
        )
        session.commit()
    engine.dispose()


def test_restart_records_ended_tasks_and_adopts_live_ones(settings: Settings) -> None:
    settings.task_runtime = "process"  # the tasks left behind are processes
    runner = LocalProcessRunner(settings)
    for task_id in ("published", "vanished", "alive"):
        left_running(settings, task_id)
        runner.work_dir(task_id).mkdir(parents=True)
    report = {"status": "SUCCESS", "segments": ["s1"]}
    (runner.work_dir("published") / "report.json").write_text(json.dumps(report))
    work = runner.work_dir("alive")
    alive = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--work-dir", str(work)],
        start_new_session=True,
    )
    (work / "pid").write_text(str(alive.pid))
    try:
        with RunningService(settings) as service:
            rows = dict(db_rows(service, select(TaskRow.id, TaskRow.status)))
            assert rows == {"published": "SUCCESS", "vanished": "FAILED", "alive": "RUNNING"}
            assert service.app.state.context.runner.is_running("alive")
            service.app.state.context.runner.kill("alive")  # adopted: the new service can stop it
            assert alive.wait(10) == -9
    finally:
        alive.kill()
        alive.wait()
    errors = dict(db_rows(service, select(TaskRow.id, TaskRow.error_msg)))
    assert errors["vanished"] == "task process ended without a report"
