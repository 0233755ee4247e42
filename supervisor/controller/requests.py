"""What a pass finds asked of its supervisor: the intents the routes and tasks wrote to the
metadata DB (db/intents.py), merged by what they ask. The pass reads them at its start (one
writer per supervisor) and marks each done in the same transaction as its effect, so an
overlord that dies between a request's answer and its effect leaves it to the next leader,
and one that dies after the effect leaves nothing to repeat. A pass reads them only when a
write hinted at them or some were left pending (`Intents`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.controller.execute import Executor
from supervisor.db.intents import (
    Checkpoint,
    Handoff,
    IntentRepository,
    Restart,
    Shutdown,
    intent_of,
)
from supervisor.db.models import IntentRow
from supervisor.model.views import Snapshot
from supervisor.services.supervisors import RESET_REASON
from supervisor.services.task_life import TaskLife


@dataclass(frozen=True)
class Pending:
    """A pass's pending intents, by what they ask."""

    handoffs: Mapping[int, list[IntentRow]] = field(default_factory=dict)  # by task group
    restarts: list[IntentRow] = field(default_factory=list)
    restart_groups: frozenset[int] | None = frozenset()  # None: every group
    checkpoints: Mapping[str, tuple[Mapping[str, int], list[IntentRow]]] = field(
        default_factory=dict
    )  # by requesting task: the sequence's start, the intents asking it
    shutdowns: Mapping[str, list[IntentRow]] = field(default_factory=dict)  # by task id


def merge(rows: Iterable[IntentRow]) -> Pending:
    """Intents asking the same thing become one request (two handoffs of a group are one
    rollover; a restart of every group covers the others; a task's newest checkpoint
    request wins)."""
    handoffs: dict[int, list[IntentRow]] = {}
    restarts: list[IntentRow] = []
    groups: set[int] | None = set()
    checkpoints: dict[str, tuple[Mapping[str, int], list[IntentRow]]] = {}
    shutdowns: dict[str, list[IntentRow]] = {}
    for row in rows:
        intent = intent_of(row)
        if isinstance(intent, Handoff):
            handoffs.setdefault(intent.group, []).append(row)
        elif isinstance(intent, Restart):
            restarts.append(row)
            if intent.groups is None or groups is None:
                groups = None
            else:
                groups |= set(intent.groups)
        elif isinstance(intent, Checkpoint) and row.task_id is not None:
            earlier = checkpoints.get(row.task_id, ({}, []))[1]
            checkpoints[row.task_id] = (intent.start, [*earlier, row])
        elif isinstance(intent, Shutdown) and row.task_id is not None:
            shutdowns.setdefault(row.task_id, []).append(row)
    return Pending(
        handoffs,
        restarts,
        None if groups is None else frozenset(groups),
        checkpoints,
        shutdowns,
    )


@dataclass
class Asked:
    """One supervisor's intents between passes; touched by its own passes alone."""

    read: bool = True  # read the pending intents next pass (the first pass does: a new leader's)
    waiting: int = 0  # intents the last pass left pending


class Intents:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.hinted: set[str] = set()  # supervisors with an intent written since their pass

    def hint(self, owner: str) -> None:
        """An intent for the owner was committed: its next pass reads the pending ones (a
        pass reads them only when told, or when one is left pending: not a query per pass of
        every supervisor)."""
        self.hinted.add(owner)

    def forget(self, owner: str) -> None:
        """No hint is left for the owner (gone, or its intents read now)."""
        self.hinted.discard(owner)

    def pending(self, session: Session, owner: str, asked: Asked) -> Pending:
        if not asked.read and owner not in self.hinted:
            return Pending()
        self.hinted.discard(owner)  # before the read: a later write hints again
        asked.read = False
        return merge(IntentRepository(session).pending(owner))

    def restart(self, tasks: TaskLife, supervisor_id: str, pending: Pending) -> None:
        """Before observing: kill what a reset restarts, and the tasks users shut down. Each
        intent is marked done in the commit that records the kills, so a repeat (the overlord
        died between the kills and that commit) finds the same tasks, none newer: no pass
        launches anything before its intents are done."""
        if pending.restarts:
            IntentRepository.done(pending.restarts, self.clock(), "tasks killed")
            groups = pending.restart_groups
            tasks.kill_running(supervisor_id, None if groups is None else set(groups), RESET_REASON)
        self.shut_down(tasks, pending)

    def shut_down(self, tasks: TaskLife, pending: Pending) -> None:
        """The tasks users shut down, each intent done in the commit of its kill."""
        now = self.clock()
        for task_id, rows in pending.shutdowns.items():
            IntentRepository.done(rows, now, "task killed")
            tasks.shut_down(task_id)

    def checkpoint(self, executor: Executor, pending: Pending, skip_groups: set[int]) -> bool:
        """Close the sequences tasks asked to (safe to repeat: done for the caller's commit).
        Whether some must be asked again (none of a group's replicas could be paused): their
        intents stay pending, for a pass soon."""
        again = executor.checkpoints(
            {task_id: start for task_id, (start, _) in pending.checkpoints.items()},
            skip_groups,
        )
        asked = [
            row
            for task_id, (_, rows) in pending.checkpoints.items()
            if task_id not in again
            for row in rows
        ]
        IntentRepository.done(asked, self.clock(), "checkpoint asked of the group")
        return bool(again)

    def moot(self, pending: Pending) -> None:
        """A supervisor with no spec: what was asked of its tasks is moot now."""
        left = [
            *(r for rows in pending.handoffs.values() for r in rows),
            *(r for _, rows in pending.checkpoints.values() for r in rows),
        ]
        IntentRepository.done(left, self.clock(), "the supervisor has no spec")

    def settle(
        self,
        session: Session,
        pending: Pending,
        snapshot: Snapshot,
        rolling: set[int],
        asked: Asked,
    ) -> None:
        """Mark done the handoffs of groups with nothing reading (Druid ignores them), and
        commit what the pass did that carries no commit of its own (its checkpoints). A
        handoff whose rollover waits for its tasks to read stays pending."""
        now = self.clock()
        reading = {t.group for t in snapshot.tasks if t.reading}
        for group, rows in pending.handoffs.items():
            if group not in rolling and group not in reading:
                IntentRepository.done(rows, now, "no task of the group was reading")
        session.commit()
        left = [r for rows in pending.handoffs.values() for r in rows if r.done_at is None]
        asked.waiting = len(left)
        asked.read = asked.read or bool(left)
