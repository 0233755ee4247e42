"""A new overlord adopts task processes an earlier one started, by their pid files."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from supervisor.runner.local import LocalProcessRunner
from supervisor.runner.protocol import Exited
from supervisor.settings import Settings
from tasks.protocol import TaskReport, TaskState


def orphan(runner: LocalProcessRunner, task_id: str, seconds: float) -> subprocess.Popen[bytes]:
    """A process shaped like a task's: its own session, its work dir on the command line."""
    work = runner.work_dir(task_id)
    work.mkdir(parents=True)
    code = f"import time; time.sleep({seconds})"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "--work-dir", str(work)], start_new_session=True
    )
    (work / "pid").write_text(str(process.pid))
    # until the child has exec'd, /proc shows this process's command line, not the task's
    deadline = time.monotonic() + 10
    while str(work).encode() not in Path(f"/proc/{process.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.01)
    return process


def runner(tmp_path: Path) -> LocalProcessRunner:
    return LocalProcessRunner(Settings(work_dir=tmp_path / "work", deep_storage=tmp_path / "d"))


def test_a_live_task_process_is_adopted_and_can_be_killed(tmp_path: Path) -> None:
    first = runner(tmp_path)
    process = orphan(first, "t1", 60)
    second = runner(tmp_path)  # the restarted overlord
    assert second.adopt("t1")
    assert second.is_running("t1")
    assert second.exited() == []
    assert second.kill("t1")
    process.wait(10)
    assert not second.is_running("t1")
    assert second.exited() == []  # the killer records how a killed task ended
    assert not second.kill("t1")


def test_an_adopted_process_that_ends_is_reported_with_its_report(tmp_path: Path) -> None:
    first = runner(tmp_path)
    process = orphan(first, "t2", 3)  # alive while it is adopted, even on a loaded machine
    second = runner(tmp_path)
    assert second.adopt("t2")
    report = {"status": "SUCCESS", "segments": []}
    (second.work_dir("t2") / "report.json").write_text(json.dumps(report))
    process.wait(10)
    assert second.exited() == [Exited("t2", None, TaskReport(status=TaskState.SUCCESS))]
    assert second.exited() == []  # reported once


def test_a_pid_now_used_by_another_process_is_not_adopted(tmp_path: Path) -> None:
    first = runner(tmp_path)
    work = first.work_dir("t3")
    work.mkdir(parents=True)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (work / "pid").write_text(str(stranger.pid))
        assert not runner(tmp_path).adopt("t3")
        (work / "pid").write_text("not a pid")
        assert not runner(tmp_path).adopt("t3")
        assert not runner(tmp_path).adopt("never-started")
    finally:
        stranger.kill()
        stranger.wait()


def test_a_report_that_does_not_parse_is_no_report(tmp_path: Path) -> None:
    runner_ = runner(tmp_path)
    runner_.work_dir("t3").mkdir(parents=True)
    (runner_.work_dir("t3") / "report.json").write_text('{"status": "DONE-ISH"}')
    assert runner_.report("t3") is None
    assert runner_.report("never-ran") is None


def test_private_files_are_made_readable_by_their_owner_only(tmp_path: Path) -> None:
    from supervisor.runner.files import write_private

    path = tmp_path / "payload.json"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, '{"password": "p"}')
    assert path.read_text() == '{"password": "p"}'
    assert path.stat().st_mode & 0o777 == 0o600
    write_private(tmp_path / "token", "t")
    assert (tmp_path / "token").stat().st_mode & 0o777 == 0o600


def test_a_task_whose_launch_went_unrecorded_is_located_or_else_killed(
    tmp_path: Path, sessions: Any
) -> None:
    """The overlord died between starting a task and writing where it serves: the next one
    finds it by what its launch left in its work directory; one it cannot find, it kills (no
    pass could pause or stop it) and records as failed, so its group replaces it."""
    from datetime import UTC, datetime

    from supervisor.db.models import TaskRow
    from supervisor.services.task_life import TaskLife
    from tasks.protocol import TaskStatusCode

    first = runner(tmp_path)
    found, lost = orphan(first, "found", 60), orphan(first, "lost", 60)
    (first.work_dir("found") / "port").write_text("41234")
    (first.work_dir("found") / "token").write_text("secret\n")
    now = datetime.now(UTC)
    with sessions() as session:
        for task_id in ("found", "lost"):
            session.add(
                TaskRow(
                    id=task_id,
                    type="index_kafka",
                    datasource="d",
                    payload={},
                    status=TaskStatusCode.RUNNING,
                    created_at=now,
                    updated_at=now,
                )
            )
        session.commit()
    second = runner(tmp_path)  # the next overlord
    try:
        with sessions() as session:
            recovered = TaskLife(session, lambda: now, second).recover()
        assert recovered.adopted == ["found"]
        assert recovered.unlaunched == []
        lost.wait(10)  # killed
        with sessions() as session:
            rows = {r.id: r for r in session.query(TaskRow)}
            assert (rows["found"].location_port, rows["found"].token) == (41234, "secret")
            assert rows["found"].status == TaskStatusCode.RUNNING
            assert rows["lost"].status == TaskStatusCode.FAILED
            assert "never recorded" in (rows["lost"].error_msg or "")
    finally:
        for process in (found, lost):
            process.kill()
            process.wait(10)


def test_a_task_recorded_but_never_started_is_started_by_the_next_leader(
    tmp_path: Path, sessions: Any
) -> None:
    """The overlord died after recording a task and before its runner had it: no runner has
    it, it left no report and no location. The next leader starts it from its recorded
    payload (as Druid's task queue runs an active task no runner has) instead of failing a
    task that never ran; a task that ran and ended without a report is still failed."""
    from datetime import UTC, datetime

    from supervisor.db.models import TaskRow
    from supervisor.runner.protocol import Launched
    from supervisor.services.task_life import TaskLife
    from tasks.protocol import IndexKafkaTask, TaskStatusCode
    from tests.specs import task

    class Recording(LocalProcessRunner):
        launched: ClassVar[list[str]] = []

        def launch(self, task: IndexKafkaTask) -> Launched:
            self.launched.append(task.id)
            return Launched("127.0.0.1", 45678, "log", "t0ken")

    now = datetime.now(UTC)
    with sessions() as session:
        for task_id, port in (("unstarted", None), ("vanished", 45000)):
            session.add(
                TaskRow(
                    id=task_id,
                    type="index_kafka",
                    datasource="d",
                    payload=task(task_id, {"bootstrap.servers": "b:9"}),
                    status=TaskStatusCode.RUNNING,
                    location_port=port,
                    token="x" if port else None,
                    created_at=now,
                    updated_at=now,
                )
            )
        session.commit()
    second = Recording(Settings(work_dir=tmp_path / "work", deep_storage=tmp_path / "d"))
    with sessions() as session:
        recovered = TaskLife(session, lambda: now, second).recover()
    assert (recovered.adopted, recovered.unlaunched) == ([], ["unstarted"])
    assert second.launched == []  # not on the lease's thread: the monitor's first pass does it
    with sessions() as session:
        TaskLife(session, lambda: now, second).start_unlaunched(recovered.unlaunched)
        TaskLife(session, lambda: now, second).start_unlaunched(recovered.unlaunched)
    assert second.launched == ["unstarted"]  # once
    with sessions() as session:
        rows = {r.id: r for r in session.query(TaskRow)}
        assert rows["unstarted"].status == TaskStatusCode.RUNNING
        assert (rows["unstarted"].location_port, rows["unstarted"].token) == (45678, "t0ken")
        assert rows["vanished"].status == TaskStatusCode.FAILED
        assert rows["vanished"].error_msg == "task process ended without a report"


def test_a_launch_the_metadata_db_interrupted_is_seen_through_once_it_answers(
    tmp_path: Path, sessions: Any
) -> None:
    """bench/chaos.py seed 33: PostgreSQL stopped while a resume's tasks were launched. The
    task was recorded, then choosing its task host read the DB and failed: the task stayed
    "running" without a location, never started, and its group waited for it to read for as
    long as the overlord led. Now it is held for the task monitor, which starts it once the
    DB answers and wakes its supervisor."""
    from datetime import UTC, datetime

    from sqlalchemy.exc import OperationalError

    from supervisor.db.models import TaskRow
    from supervisor.leading import TaskMonitor
    from supervisor.runner.protocol import Launched
    from supervisor.services.task_life import TaskLife, Unsettled
    from tasks.protocol import IndexKafkaTask, TaskStatusCode
    from tests.specs import task

    class DbAway(LocalProcessRunner):
        """Its first launch fails as the cluster runner's does when the DB is away."""

        launched: ClassVar[list[str]] = []

        def launch(self, task: IndexKafkaTask) -> Launched:
            if not self.launched:
                self.launched.append("(failed)")
                raise OperationalError("SELECT workers", {}, ConnectionRefusedError("refused"))
            self.launched.append(task.id)
            return Launched("127.0.0.1", 45679, "log", "t0ken")

    class Woken:
        def __init__(self) -> None:
            self.tasks: list[str] = []

        def wake_tasks(self, task_ids: list[str]) -> None:
            self.tasks += task_ids

        def sync(self) -> None: ...

    now = datetime.now(UTC)
    held = Unsettled()  # the overlord's: the launch holds it, its monitor settles it
    first = DbAway(Settings(work_dir=tmp_path / "work", deep_storage=tmp_path / "d"))
    payload = IndexKafkaTask.model_validate(task("interrupted", {"bootstrap.servers": "b:9"}))
    with sessions() as session:
        try:
            TaskLife(session, lambda: now, first, unsettled=held).launch(
                payload, wait_for_slot=True
            )
        except OperationalError:
            pass
        else:
            raise AssertionError("the launch did not fail")
    with sessions() as session:
        row = session.get(TaskRow, "interrupted")
        assert row is not None and row.status == TaskStatusCode.RUNNING  # not failed: not its fault
        assert row.location_port is None
    woken = Woken()
    monitor = TaskMonitor(
        sessions,
        lambda: now,
        first,
        woken,  # type: ignore[arg-type]
        sweep=False,
        unsettled=held,
    )
    monitor.run_once()
    assert first.launched == ["(failed)", "interrupted"]
    assert woken.tasks == ["interrupted"]
    with sessions() as session:
        row = session.get(TaskRow, "interrupted")
        assert row is not None and (row.location_port, row.token) == (45679, "t0ken")
    monitor.run_once()  # settled: nothing more
    assert first.launched == ["(failed)", "interrupted"] and held.take() == []
