"""The intents' SQL: written by the routes, read and marked done by the leader's passes.

An intent is written in the same transaction as the change it goes with (a reset's offsets,
say) and marked done in the same transaction as its effect (the killed tasks' rows, the
rollover's end offsets); repositories never commit, the caller does at that boundary.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter
from sqlalchemy import select
from sqlalchemy.orm import Session

from supervisor.db.models import IntentRow

STANDALONE = ""  # the owner of intents about a task that has no supervisor (ids are never "")


class IntentKind(StrEnum):
    HANDOFF = "handoff"
    RESTART = "restart"
    CHECKPOINT = "checkpoint"
    SHUTDOWN = "shutdown"


class Handoff(BaseModel):
    """Roll the group over early (best effort)."""

    kind: Literal[IntentKind.HANDOFF] = IntentKind.HANDOFF
    group: int


class Restart(BaseModel):
    """A reset moved the offsets of these groups (None: every group): kill what reads them."""

    kind: Literal[IntentKind.RESTART] = IntentKind.RESTART
    groups: list[int] | None = None


class Checkpoint(BaseModel):
    """The intent's task asks its sequence that starts at `start` to be closed."""

    kind: Literal[IntentKind.CHECKPOINT] = IntentKind.CHECKPOINT
    start: dict[str, int]


class Shutdown(BaseModel):
    """A user asked the intent's task to be killed."""

    kind: Literal[IntentKind.SHUTDOWN] = IntentKind.SHUTDOWN


# What an intent asks: its row's kind column and payload (the rest of the model), read back
# as one of these.
Intent = Annotated[Handoff | Restart | Checkpoint | Shutdown, Field(discriminator="kind")]
_INTENT: TypeAdapter[Handoff | Restart | Checkpoint | Shutdown] = TypeAdapter(Intent)


def intent_of(row: IntentRow) -> Handoff | Restart | Checkpoint | Shutdown | None:
    """What the row asks; None for a kind this version does not know (a newer one's: left
    alone), ValidationError when its payload is not what its kind holds."""
    if row.kind not in set(IntentKind):
        return None
    return _INTENT.validate_python({**row.payload, "kind": row.kind})


class IntentRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(
        self,
        owner: str,
        intent: Handoff | Restart | Checkpoint | Shutdown,
        now: datetime,
        *,
        task_id: str | None = None,
        author: str = "",
        comment: str = "",
        remote_address: str | None = None,
    ) -> IntentRow:
        row = IntentRow(
            owner=owner,
            kind=str(intent.kind),
            task_id=task_id,
            payload=intent.model_dump(mode="json", exclude={"kind"}),
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
