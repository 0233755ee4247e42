"""All SQL lives here. Repositories never commit; the caller commits at its boundary."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from supervisor.db.models import AuditRow, SupervisorSpecRow


class SpecRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def latest(self, supervisor_id: str) -> SupervisorSpecRow | None:
        """The newest version of a supervisor's spec, tombstone included."""
        query = (
            select(SupervisorSpecRow)
            .where(SupervisorSpecRow.supervisor_id == supervisor_id)
            .order_by(SupervisorSpecRow.id.desc())
            .limit(1)
        )
        return self.session.scalars(query).first()

    def active(self, supervisor_id: str) -> SupervisorSpecRow | None:
        row = self.latest(supervisor_id)
        return None if row is None or row.tombstone else row

    def all_active(self) -> list[SupervisorSpecRow]:
        newest = (
            select(func.max(SupervisorSpecRow.id))
            .group_by(SupervisorSpecRow.supervisor_id)
            .scalar_subquery()
        )
        query = (
            select(SupervisorSpecRow)
            .where(SupervisorSpecRow.id.in_(newest), SupervisorSpecRow.tombstone.is_(False))
            .order_by(SupervisorSpecRow.supervisor_id)
        )
        return list(self.session.scalars(query))

    def history(
        self, supervisor_id: str | None = None, count: int | None = None
    ) -> list[SupervisorSpecRow]:
        """Versions newest first, for one supervisor or all of them."""
        query = select(SupervisorSpecRow).order_by(SupervisorSpecRow.id.desc())
        if supervisor_id is not None:
            query = query.where(SupervisorSpecRow.supervisor_id == supervisor_id)
        if count is not None:
            query = query.limit(count)
        return list(self.session.scalars(query))

    def append(
        self,
        supervisor_id: str,
        datasource: str,
        payload: dict[str, Any],
        created_at: datetime,
        *,
        suspended: bool = False,
        tombstone: bool = False,
    ) -> SupervisorSpecRow:
        row = SupervisorSpecRow(
            supervisor_id=supervisor_id,
            datasource=datasource,
            payload=payload,
            created_at=created_at,
            suspended=suspended,
            tombstone=tombstone,
        )
        self.session.add(row)
        self.session.flush()
        return row


class AuditRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(
        self,
        key: str,
        kind: str,
        action: str,
        author: str,
        comment: str,
        remote_address: str | None,
        payload: dict[str, Any],
        created_at: datetime,
    ) -> None:
        self.session.add(
            AuditRow(
                audit_key=key,
                type=kind,
                action=action,
                author=author,
                comment=comment,
                remote_address=remote_address,
                payload=payload,
                created_at=created_at,
            )
        )
