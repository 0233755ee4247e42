"""What tasks leave in deep storage that nothing will use: the persists of a task that did not
publish them (killed, failed, lost with its host) stay under `_tasks/<task id>/` (a task that
publishes deletes its own). The leader sweeps them away once the task no longer runs."""

from __future__ import annotations

import logging

from sqlalchemy import select

from supervisor.db.engine import SessionFactory
from supervisor.db.models import TaskRow
from supervisor.loop import Loop
from tasks.protocol import TaskStatusCode
from tasks.storage import Storage, StorageError

log = logging.getLogger(__name__)
TASK_FILES = "_tasks"


def sweep_task_files(storage: Storage, sessions: SessionFactory) -> list[str]:
    """Delete `_tasks/<id>` of every task that is not running (or not known); the ids swept."""
    try:
        names = storage.dirs(storage.path(TASK_FILES))
    except (OSError, StorageError) as exc:
        log.warning("deep storage not swept: %s", exc)
        return []
    if not names:
        return []
    with sessions() as session:
        query = select(TaskRow.id).where(
            TaskRow.id.in_(names), TaskRow.status == TaskStatusCode.RUNNING
        )
        running = set(session.scalars(query))
    swept = []
    for name in names:
        if name in running:
            continue
        try:
            storage.delete_dir(storage.path(TASK_FILES, name))
        except OSError as exc:
            log.warning("task %s's files not deleted: %s", name, exc)
            continue
        swept.append(name)
    if swept:
        log.info("deleted the unpublished files of %d ended tasks: %s", len(swept), swept)
    return swept


class Sweeper(Loop):
    """`sweep_task_files` every `every_s` while this overlord leads, in a thread of its own (a
    slow deep storage never holds up the recording of exits)."""

    name = "storage-sweeper"

    def __init__(self, storage: Storage, sessions: SessionFactory, every_s: float = 60.0) -> None:
        self.storage = storage
        self.sessions = sessions
        super().__init__(every_s)

    def run_once(self) -> None:
        sweep_task_files(self.storage, self.sessions)

    def failed(self, exc: Exception) -> None:
        log.exception("deep storage sweep failed", exc_info=exc)
