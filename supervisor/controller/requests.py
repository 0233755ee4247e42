"""What a pass finds asked of its supervisor: the intents the routes and tasks wrote to the
metadata DB (db/intents.py), merged by what they ask. The pass reads them at its start (one
writer per supervisor) and marks each done in the same transaction as its effect, so an
overlord that dies between a request's answer and its effect leaves it to the next leader,
and one that dies after the effect leaves nothing to repeat."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from supervisor.db.intents import IntentKind
from supervisor.db.models import IntentRow


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
        kind = row.kind
        if kind == IntentKind.HANDOFF:
            handoffs.setdefault(int(row.payload["group"]), []).append(row)
        elif kind == IntentKind.RESTART:
            restarts.append(row)
            named = row.payload.get("groups")
            if named is None or groups is None:
                groups = None
            else:
                groups |= {int(g) for g in named}
        elif kind == IntentKind.CHECKPOINT and row.task_id is not None:
            earlier = checkpoints.get(row.task_id, ({}, []))[1]
            start = {str(p): int(o) for p, o in row.payload["start"].items()}
            checkpoints[row.task_id] = (start, [*earlier, row])
        elif kind == IntentKind.SHUTDOWN and row.task_id is not None:
            shutdowns.setdefault(row.task_id, []).append(row)
    return Pending(
        handoffs,
        restarts,
        None if groups is None else frozenset(groups),
        checkpoints,
        shutdowns,
    )
