"""The intents' SQL: written by the routes, read and marked done by the leader's passes.

An intent is written in the same transaction as the change it goes with (a reset's offsets,
say) and marked done in the same transaction as its effect (the killed tasks' rows, the
rollover's end offsets); repositories never commit, the caller does at that boundary.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from supervisor.db.models import IntentRow

STANDALONE = ""  # the owner of intents about a task that has no supervisor (ids are never "")


class IntentKind(StrEnum):
    HANDOFF = "handoff"  # payload {"group": g}: roll the group over early (best effort)
    RESTART = "restart"  # payload {"groups": [g, ...] | None}: a reset moved their offsets
    CHECKPOINT = "checkpoint"  # task_id, payload {"start": {...}}: close that sequence
    SHUTDOWN = "shutdown"  # task_id: a user asked the task to be killed


class IntentRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(
        self,
        owner: str,
        kind: IntentKind,
        payload: dict[str, Any],
        now: datetime,
        *,
        task_id: str | None = None,
        author: str = "",
        comment: str = "",
        remote_address: str | None = None,
    ) -> IntentRow:
        row = IntentRow(
            owner=owner,
            kind=str(kind),
            task_id=task_id,
            payload=payload,
            author=author,
            comment=comment,
            remote_address=remote_address,
            created_at=now,
        )
        self.session.add(row)
        return row

    def pending(self, owner: str) -> list[IntentRow]:
        """The owner's intents not yet done, oldest first."""
        query = (
            select(IntentRow)
            .where(IntentRow.done_at.is_(None), IntentRow.owner == owner)
            .order_by(IntentRow.id)
        )
        return list(self.session.scalars(query))

    def owners_pending(self) -> set[str]:
        query = select(IntentRow.owner).where(IntentRow.done_at.is_(None)).distinct()
        return set(self.session.scalars(query))

    @staticmethod
    def done(rows: Iterable[IntentRow], now: datetime, outcome: str) -> None:
        """Mark them done; the caller's commit (the effect's own) writes it."""
        for row in rows:
            if row.done_at is None:
                row.done_at, row.outcome = now, outcome
