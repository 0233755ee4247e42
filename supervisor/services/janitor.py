"""Metadata and disk kept bounded (the leader's `Janitor`, every `SLUICEGATE_JANITOR_PERIOD_S`,
300 s): done intents past `SLUICEGATE_INTENT_RETENTION` (P1D), audit rows past
`SLUICEGATE_AUDIT_RETENTION` (P90D, Druid's druid.coordinator.kill.audit), ended task rows
past `SLUICEGATE_TASK_RETENTION` (P7D) with their work directories (logs, reports, payloads)
on this host (a task host's agent prunes its own by the same setting), and the rows of task
hosts not heard from for `SLUICEGATE_WORKER_RETENTION` (P1D; a disabled host's row stays); the
shared task host application's log is cut past `SLUICEGATE_APP_LOG_MAX_MB` (64). Spec
history stays, as Druid keeps it. On SQLite each run also cuts the DB's free pages (what
deletes, its own and kills', left) from the file."""

from __future__ import annotations

import logging

from sqlalchemy import select

from supervisor.clock import Clock
from supervisor.db.engine import SessionFactory, give_back_free_pages
from supervisor.db.models import TaskRow
from supervisor.db.retention import MetadataRetention
from supervisor.loop import Loop
from supervisor.model.fence import Fence
from supervisor.model.retention import minus
from supervisor.runner.files import cap_app_log, prune_work_dirs
from supervisor.runner.protocol import Runner
from supervisor.settings import Settings
from tasks.protocol import TaskStatusCode
from tasks.spec.periods import parse_period

log = logging.getLogger(__name__)
JANITOR_EVERY_S = 300.0


class Janitor(Loop):
    name = "janitor"

    def __init__(
        self,
        sessions: SessionFactory,
        runner: Runner,
        fence: Fence,
        clock: Clock,
        settings: Settings,
        every_s: float = JANITOR_EVERY_S,
    ) -> None:
        self.sessions = sessions
        self.runner = runner
        self.fence = fence
        self.clock = clock
        self.settings = settings
        super().__init__(every_s)

    def run_once(self) -> None:
        self.sweep()

    def sweep(self) -> dict[str, int]:
        """One run: how many of each it deleted."""
        self.fence.check()
        now = self.clock()
        settings = self.settings
        with self.sessions() as session:
            done = MetadataRetention(session).prune(
                minus(now, parse_period(settings.intent_retention)),
                minus(now, parse_period(settings.audit_retention)),
                minus(now, parse_period(settings.task_retention)),
                minus(now, parse_period(settings.worker_retention)),
            )
            session.commit()
            freed = give_back_free_pages(session)
            running = set(
                session.scalars(select(TaskRow.id).where(TaskRow.status == TaskStatusCode.RUNNING))
            )
        cutoff = minus(now, parse_period(settings.task_retention)).timestamp()
        pruned = prune_work_dirs(
            settings.work_dir / "tasks",
            cutoff,
            lambda task_id: task_id in running or self.runner.is_running(task_id),
        )
        done["workDirectories"] = len(pruned)
        done["logsCut"] = int(cap_app_log(settings.work_dir, settings.app_log_max_mb))
        if any(done.values()):
            log.info("past their retention, deleted: %s; DB pages given back: %d", done, freed)
        return done
