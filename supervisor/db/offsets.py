"""Committed offsets, each supervisor's one row swapped by version, and the generation of
them that each reset begins."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from supervisor.db.models import CommittedOffsetsRow, OffsetGenerationRow

_COMMITTED_OFFSETS = select(CommittedOffsetsRow.offsets).where(
    CommittedOffsetsRow.supervisor_id == bindparam("supervisor_id")
)


class OffsetsRepository:
    """Committed offsets per supervisor, changed only by compare-and-swap on `version`."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, supervisor_id: str) -> CommittedOffsetsRow | None:
        return self.session.get(CommittedOffsetsRow, supervisor_id, populate_existing=True)

    def offsets(self, supervisor_id: str) -> dict[str, Any] | None:
        """Just the committed offsets (JSON form), None when there are none: for readers."""
        found = self.session.execute(_COMMITTED_OFFSETS, {"supervisor_id": supervisor_id})
        return found.scalar_one_or_none()

    def insert(
        self,
        supervisor_id: str,
        datasource: str,
        stream: str,
        offsets: dict[str, int],
        now: datetime,
    ) -> None:
        self.session.add(
            CommittedOffsetsRow(
                supervisor_id=supervisor_id,
                datasource=datasource,
                stream=stream,
                offsets=offsets,
                version=1,
                updated_at=now,
            )
        )
        self.session.flush()

    def delete(self, supervisor_id: str) -> bool:
        row = self.get(supervisor_id)
        if row is None:
            return False
        self.session.delete(row)
        self.session.flush()
        return True

    def compare_and_swap(
        self, supervisor_id: str, expected_version: int, offsets: dict[str, int], now: datetime
    ) -> bool:
        """Write new offsets if nobody changed them since `expected_version` was read."""
        result = self.session.execute(
            update(CommittedOffsetsRow)
            .where(
                CommittedOffsetsRow.supervisor_id == supervisor_id,
                CommittedOffsetsRow.version == expected_version,
            )
            .values(offsets=offsets, version=expected_version + 1, updated_at=now)
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(result, "rowcount", 0) == 1)


class OffsetGenerations:
    """Each supervisor's offsets generation (OffsetGenerationRow): 0 until its first reset."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, supervisor_id: str) -> int:
        found = self.session.get(OffsetGenerationRow, supervisor_id, populate_existing=True)
        return 0 if found is None else found.generation

    def advance(self, supervisor_id: str, now: datetime) -> int:
        """One more reset, in the caller's transaction; the new generation. (Two resets at
        once: the row's lock orders them on PostgreSQL, SQLite's one writer anyway; a race to
        make the row is the loser's update.)"""
        step = (
            update(OffsetGenerationRow)
            .where(OffsetGenerationRow.supervisor_id == supervisor_id)
            .values(generation=OffsetGenerationRow.generation + 1, updated_at=now)
            .execution_options(synchronize_session=False)
        )
        if getattr(self.session.execute(step), "rowcount", 0) != 1:
            try:
                with self.session.begin_nested():
                    self.session.add(
                        OffsetGenerationRow(
                            supervisor_id=supervisor_id, generation=1, updated_at=now
                        )
                    )
            except IntegrityError:
                self.session.execute(step)
        return self.get(supervisor_id)
