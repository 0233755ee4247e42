"""Metadata and disk kept bounded (supervisor/services/janitor.py) on SQLite and PostgreSQL:
done intents, audit rows, ended tasks and task hosts gone past their retention are deleted,
with the ended tasks' work directories; pending intents, recent rows, running tasks and their
directories, and disabled hosts stay."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select, text

from supervisor.db.engine import give_back_free_pages, make_engine, migrate, session_factory
from supervisor.db.models import AuditRow, IntentRow, TaskRow, WorkerRow
from supervisor.model.fence import Unfenced
from supervisor.runner.local import LocalProcessRunner
from supervisor.services.janitor import Janitor
from supervisor.settings import Settings

NOW = datetime.now(UTC)


def _intent(ident: int, done: datetime | None) -> IntentRow:
    return IntentRow(
        id=ident,
        owner="wiki",
        kind="handoff",
        task_id=None,
        payload={},
        author="",
        comment="",
        remote_address=None,
        created_at=NOW - timedelta(days=30),
        done_at=done,
    )


def _audit(ident: int, age: timedelta) -> AuditRow:
    return AuditRow(
        id=ident,
        audit_key="wiki",
        type="supervisor",
        action="update",
        author="",
        comment="",
        remote_address=None,
        payload={},
        created_at=NOW - age,
    )


def _task(task_id: str, status: str, age: timedelta) -> TaskRow:
    return TaskRow(
        id=task_id,
        type="index_kafka",
        supervisor_id="wiki",
        datasource="wiki",
        payload={},
        status=status,
        created_at=NOW - age,
        updated_at=NOW - age,
    )


def _worker(host: str, silent: timedelta, enabled: bool = True) -> WorkerRow:
    return WorkerRow(
        host=host,
        scheme="http",
        ip="127.0.0.1",
        capacity=4,
        version="1",
        category="_default_worker_category",
        token="t",
        enabled=enabled,
        registered_at=NOW - silent - timedelta(hours=1),
        heartbeat_at=NOW - silent,
    )


def _work(settings: Settings, task_id: str, age: timedelta) -> Path:
    work = settings.work_dir / "tasks" / task_id
    work.mkdir(parents=True)
    then = time.time() - age.total_seconds()
    for name in ("task.log", "report.json"):
        (work / name).write_text("x")
        os.utime(work / name, (then, then))
    os.utime(work, (then, then))
    return work


def test_rows_and_directories_past_their_retention_go_the_rest_stays(settings: Settings) -> None:
    engine = make_engine(settings.metadata_url)
    migrate(engine)
    sessions = session_factory(engine)
    week, old = timedelta(days=8), timedelta(days=100)
    with sessions() as session:
        session.add_all(
            [
                _intent(1, NOW - timedelta(days=2)),  # done long ago: goes
                _intent(2, NOW - timedelta(hours=1)),  # done lately: stays
                _intent(3, None),  # pending for a month: stays
                _audit(1, old),
                _audit(2, timedelta(days=10)),
                _task("ended-long-ago", "SUCCESS", week),
                _task("failed-long-ago", "FAILED", week),
                _task("ended-lately", "SUCCESS", timedelta(days=1)),
                _task("running-long", "RUNNING", week),
                _worker("127.0.0.1:8101", timedelta(days=2)),  # gone two days: goes
                _worker("127.0.0.1:8102", timedelta(days=2), enabled=False),  # disabled: stays
                _worker("127.0.0.1:8103", timedelta(hours=2)),  # lost lately: stays
                _worker("127.0.0.1:8104", timedelta(seconds=1)),  # alive: stays
            ]
        )
        session.commit()
    dirs = {
        "ended-long-ago": _work(settings, "ended-long-ago", week),
        "failed-long-ago": _work(settings, "failed-long-ago", week),
        "ended-lately": _work(settings, "ended-lately", timedelta(days=1)),
        "running-long": _work(settings, "running-long", week),  # a quiet task: old files
        "no-row-long-ago": _work(settings, "no-row-long-ago", week),  # its row went before
    }
    janitor = Janitor(sessions, LocalProcessRunner(settings), Unfenced(), lambda: NOW, settings)
    assert janitor.sweep() == {
        "intents": 1,
        "audit": 1,
        "tasks": 2,
        "workers": 1,
        "workDirectories": 3,
        "logsCut": 0,
    }
    with sessions() as session:
        assert sorted(session.scalars(select(IntentRow.id))) == [2, 3]
        assert list(session.scalars(select(AuditRow.id))) == [2]
        assert sorted(session.scalars(select(TaskRow.id))) == ["ended-lately", "running-long"]
        hosts = sorted(session.scalars(select(WorkerRow.host)))
        assert hosts == ["127.0.0.1:8102", "127.0.0.1:8103", "127.0.0.1:8104"]
    assert {name for name, path in dirs.items() if path.exists()} == {
        "ended-lately",
        "running-long",
    }
    assert janitor.sweep() == {
        "intents": 0,
        "audit": 0,
        "tasks": 0,
        "workers": 0,
        "workDirectories": 0,
        "logsCut": 0,
    }
    engine.dispose()


def test_the_pages_pruned_rows_held_leave_the_sqlite_file(settings: Settings) -> None:
    engine = make_engine(settings.metadata_url)
    migrate(engine)
    sessions = session_factory(engine)
    with sessions() as session:
        old = [_task(f"old-{i}", "SUCCESS", timedelta(days=8)) for i in range(2000)]
        for row in old:
            row.payload = {"spec": "x" * 2000}  # ~1,000 pages of rows
        session.add_all([*old, _task("running", "RUNNING", timedelta(days=8))])
        session.commit()

    def pages() -> tuple[int, int]:
        with sessions() as session:
            count = session.execute(text("PRAGMA page_count")).scalar_one()
            return count, session.execute(text("PRAGMA freelist_count")).scalar_one()

    janitor = Janitor(sessions, LocalProcessRunner(settings), Unfenced(), lambda: NOW, settings)
    if engine.dialect.name == "postgresql":  # its autovacuum's own: nothing to give back here
        assert janitor.sweep()["tasks"] == 2000
        with sessions() as session:
            assert give_back_free_pages(session) == 0
        engine.dispose()
        return
    before, _ = pages()
    assert before > 1000
    assert janitor.sweep()["tasks"] == 2000
    after, free = pages()
    assert free == 0 and after < before / 4  # the file is cut back to what still holds rows
    with sessions() as session:
        assert list(session.scalars(select(TaskRow.id))) == ["running"]
    engine.dispose()
    assert Path(settings.metadata_url.removeprefix("sqlite:///")).stat().st_size < before * 4096


def test_the_application_log_past_its_cap_is_cut_while_its_writer_appends(
    settings: Settings,
) -> None:
    """A real process appending to the log as the shared application does (spawn's O_APPEND):
    past the cap the janitor moves its lines to app.log.1 and empties the file in place, and the
    writer's next lines start the file afresh, with no hole of zeros where the old ones were."""
    import sys

    from supervisor.runner.files import APP_DIR, APP_LOG
    from supervisor.runner.spawn import spawn

    settings.app_log_max_mb = 1
    folder = settings.work_dir / APP_DIR
    folder.mkdir(parents=True)
    log, go_on = folder / APP_LOG, folder / "go-on"
    writer = (
        "import os, sys, time\n"
        "n = 0\n"
        "def lines(count):\n"
        "    global n\n"
        "    for _ in range(count):\n"
        "        sys.stdout.write(f'line {n:08d} ' + 'x' * 100 + chr(10)); n += 1\n"
        "    sys.stdout.flush()\n"
        "lines(12000)\n"  # ~1.4 MB, past the 1 MiB cap
        f"while not os.path.exists({str(go_on)!r}): time.sleep(0.01)\n"
        "lines(10)\n"
    )
    engine = make_engine(settings.metadata_url)
    migrate(engine)
    janitor = Janitor(
        session_factory(engine), LocalProcessRunner(settings), Unfenced(), lambda: NOW, settings
    )
    child = spawn([sys.executable, "-c", writer], folder, log)
    try:
        deadline = time.monotonic() + 30
        while (not log.exists() or log.stat().st_size < 12000 * 114) and child.poll() is None:
            assert time.monotonic() < deadline, "the writer never wrote its lines"
            time.sleep(0.05)
        assert janitor.sweep()["logsCut"] == 1
        assert log.stat().st_size == 0
        kept = (folder / f"{APP_LOG}.1").read_text().splitlines()
        assert len(kept) == 12000 and kept[0].startswith("line 00000000")
        assert oct((folder / f"{APP_LOG}.1").stat().st_mode & 0o777) == "0o600"
        go_on.touch()
        assert child.wait(30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    after = log.read_bytes()
    assert b"\0" not in after
    assert after.splitlines()[0].startswith(b"line 00012000") and len(after.splitlines()) == 10
    assert janitor.sweep()["logsCut"] == 0  # under the cap now
    engine.dispose()
