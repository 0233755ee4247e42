"""Supervisor statuses in the metadata DB (shared DBs only): the leader writes each after its
pass, a follower reads them. Each write commits on its own: a status is worth something to a
follower only once it can see it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from supervisor.db.models import SupervisorStatusRow

_ROW = SupervisorStatusRow


class StatusRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def put(self, supervisor_id: str, payload: dict[str, Any], epoch: int, now: datetime) -> None:
        values = {"supervisor_id": supervisor_id, "payload": payload, "epoch": epoch}
        dialect = postgresql if self.session.get_bind().dialect.name != "sqlite" else sqlite
        statement = dialect.insert(_ROW).values(**values, updated_at=now)
        self.session.execute(
            statement.on_conflict_do_update(
                index_elements=[_ROW.supervisor_id],
                set_={"payload": payload, "epoch": epoch, "updated_at": now},
                where=_ROW.epoch <= statement.excluded.epoch,  # a deposed leader's is dropped
            )
        )
        self.session.commit()

    def drop(self, supervisor_id: str) -> None:
        self.session.execute(delete(_ROW).where(_ROW.supervisor_id == supervisor_id))
        self.session.commit()

    def get(self, supervisor_id: str) -> dict[str, Any] | None:
        return self.session.scalar(select(_ROW.payload).where(_ROW.supervisor_id == supervisor_id))

    def all(self) -> dict[str, dict[str, Any]]:
        return {
            row[0]: row[1] for row in self.session.execute(select(_ROW.supervisor_id, _ROW.payload))
        }
