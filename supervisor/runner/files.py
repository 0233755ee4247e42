"""What the runners read and write of a task's work directory and of /proc: files that hold
secrets (its token; its payload, whose consumerProperties may hold passwords), made readable
by their owner only from the start; the report a task leaves; whether a process still runs."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from tasks.procfs import running
from tasks.protocol import TaskReport

log = logging.getLogger(__name__)
APP_DIR, APP_LOG = "host-app", "app.log"  # the shared application's folder in <work>, its log


def read_report(work: Path) -> TaskReport | None:
    """The final report a task left in its work directory, if any (None for one that does
    not parse, with a warning)."""
    try:
        return TaskReport.model_validate_json((work / "report.json").read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        log.warning("task %s left a report that cannot be read: %s", work.name, exc)
        return None


def process_alive(pid: int, marker: bytes) -> bool:
    """Whether `pid` still runs (not a zombie) with `marker` in its command line (not a pid
    reused by another program)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return marker in cmdline and running(pid)


def cap_log(path: Path, max_bytes: int) -> bool:
    """Whether `path`, a log past `max_bytes`, was cut: its lines copied to `<path>.1` (made
    anew, its owner's only), then the file emptied in place. Its writer appends (O_APPEND), so
    its next line lands at the new start; one written between the copy's last read and the
    cut is lost, as with logrotate's copytruncate."""
    import shutil

    kept = path.with_name(path.name + ".1")
    try:
        if path.stat().st_size <= max_bytes:
            return False
        kept.unlink(missing_ok=True)
        descriptor = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with path.open("r+b") as source, os.fdopen(descriptor, "wb") as copy:
            shutil.copyfileobj(source, copy, 1 << 20)
            source.truncate(0)
    except OSError as exc:
        log.warning("log %s not cut: %s", path, exc)
        return False
    return True


def cap_app_log(work_dir: Path, max_mb: int) -> bool:
    """`cap_log` on the shared task host application's log under `work_dir`."""
    return cap_log(work_dir / APP_DIR / APP_LOG, max_mb * 2**20)


def write_private(path: Path, text: str) -> None:
    """`text` into `path`, mode 0600 whether the file is new or not."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


def prune_work_dirs(root: Path, older_than: float, running: Callable[[str], bool]) -> list[str]:
    """Delete the work directories under `root` (`<work>/tasks`) of tasks not `running` whose
    files were all last written before `older_than` (a time.time()): ended tasks' logs,
    reports and payloads past their retention. The ids deleted."""
    import shutil

    deleted = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    for work in entries:
        if not work.is_dir():
            continue
        try:
            newest = max([work.stat().st_mtime, *(f.stat().st_mtime for f in work.iterdir())])
        except OSError:
            continue
        if newest >= older_than or running(work.name):
            continue
        shutil.rmtree(work, ignore_errors=True)
        deleted.append(work.name)
    return deleted
