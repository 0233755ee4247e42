"""All SQL lives here. Repositories never commit; the caller commits at its boundary."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import ColumnElement, Engine, bindparam, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from supervisor.db.models import (
    AuditRow,
    AutoscalerRow,
    SegmentRow,
    SupervisorSpecRow,
)
from supervisor.errors import Raced
from supervisor.lru import CACHE_BYTES, Lru, json_weight

# The statements every loop pass and status request runs, built once with bound parameters:
# building a select costs SQLAlchemy about as much CPU as running it.
_SPEC = SupervisorSpecRow
_LATEST_SPEC = (  # every column but the payload, which comes from _payloads
    select(
        _SPEC.id,
        _SPEC.supervisor_id,
        _SPEC.datasource,
        _SPEC.suspended,
        _SPEC.tombstone,
        _SPEC.created_at,
    )
    .where(_SPEC.supervisor_id == bindparam("supervisor_id"))
    .order_by(_SPEC.id.desc())
    .limit(1)
)
_SPEC_PAYLOAD = select(_SPEC.payload).where(_SPEC.id == bindparam("version"))
SPEC_PAYLOADS_KEPT = 4096  # per metadata DB: a thousand supervisors' current and last versions


@dataclass(frozen=True, slots=True)
class SpecVersion:
    """One stored version of a supervisor's spec. Versions are rows never changed once
    written, so their payloads are kept in memory and shared: treat `payload` as read-only."""

    id: int
    supervisor_id: str
    datasource: str
    suspended: bool
    tombstone: bool
    created_at: datetime
    payload: dict[str, Any]

    @classmethod
    def of(cls, row: SupervisorSpecRow) -> SpecVersion:
        return cls(
            row.id,
            row.supervisor_id,
            row.datasource,
            row.suspended,
            row.tombstone,
            row.created_at,
            row.payload,
        )


_payload_caches: WeakKeyDictionary[Engine, Lru[int, dict[str, Any]]] = WeakKeyDictionary()
_payload_caches_lock = threading.Lock()


def _payloads(session: Session) -> Lru[int, dict[str, Any]]:
    """The decoded spec payloads of one metadata DB (a process may open several: tests), by
    version. Decoding a payload's JSON cost more than the query that read it, on every loop
    pass and every status request."""
    engine = session.get_bind().engine  # a Connection's too
    with _payload_caches_lock:
        cache = _payload_caches.get(engine)
        if cache is None:
            cache = _payload_caches[engine] = Lru(SPEC_PAYLOADS_KEPT, CACHE_BYTES)
        return cache


class SpecRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def latest(self, supervisor_id: str) -> SpecVersion | None:
        """The newest version of a supervisor's spec, tombstone included."""
        head = self.session.execute(_LATEST_SPEC, {"supervisor_id": supervisor_id}).first()
        if head is None:
            return None
        return SpecVersion(*head, payload=self.payload(head.id))

    def payload(self, version: int) -> dict[str, Any]:
        """The payload of a stored version (shared: read-only)."""
        cache = _payloads(self.session)
        payload = cache.get(version)
        if payload is None:
            payload = self.session.execute(_SPEC_PAYLOAD, {"version": version}).scalar_one()
            cache.put(version, payload, 3 * json_weight(payload))
        return payload

    def datasources_of(self, supervisor_id: str) -> list[str]:
        """Every dataSource any version of the supervisor had (none: no such supervisor)."""
        query = (
            select(SupervisorSpecRow.datasource)
            .where(SupervisorSpecRow.supervisor_id == supervisor_id)
            .distinct()
        )
        return sorted(self.session.scalars(query))

    def active(self, supervisor_id: str) -> SpecVersion | None:
        row = self.latest(supervisor_id)
        return None if row is None or row.tombstone else row

    def all_active(self) -> list[SupervisorSpecRow]:
        """The newest version of every supervisor not terminated, by id."""
        query = (
            select(SupervisorSpecRow)
            .where(*self._active())
            .order_by(SupervisorSpecRow.supervisor_id)
        )
        return list(self.session.scalars(query))

    def active_states(self) -> list[tuple[str, str, bool]]:
        """(id, datasource, suspended) of every supervisor not terminated, by id: columns, not
        ORM objects (a thousand of those cost five times the query itself)."""
        spec = SupervisorSpecRow
        query = (
            select(spec.supervisor_id, spec.datasource, spec.suspended)
            .where(*self._active())
            .order_by(spec.supervisor_id)
        )
        return [(row[0], row[1], row[2]) for row in self.session.execute(query)]

    def active_ids(self) -> list[str]:
        """The ids of every supervisor not terminated, sorted."""
        query = (
            select(SupervisorSpecRow.supervisor_id)
            .where(*self._active())
            .order_by(SupervisorSpecRow.supervisor_id)
        )
        return list(self.session.scalars(query))

    @staticmethod
    def _active() -> tuple[ColumnElement[bool], ...]:
        newest = (
            select(func.max(SupervisorSpecRow.id))
            .group_by(SupervisorSpecRow.supervisor_id)
            .scalar_subquery()
        )
        return SupervisorSpecRow.id.in_(newest), SupervisorSpecRow.tombstone.is_(False)

    def history(
        self, supervisor_id: str | None = None, count: int | None = None
    ) -> Iterator[SupervisorSpecRow]:
        """Versions newest first, for one supervisor or all of them, read a few at a time (a
        caller that stops early has not loaded the rest)."""
        query = select(SupervisorSpecRow).order_by(SupervisorSpecRow.id.desc())
        if supervisor_id is not None:
            query = query.where(SupervisorSpecRow.supervisor_id == supervisor_id)
        if count is not None:
            query = query.limit(count)
        yield from self.session.scalars(query.execution_options(yield_per=32))

    def append(
        self,
        supervisor_id: str,
        datasource: str,
        payload: dict[str, Any],
        created_at: datetime,
        *,
        parent: int,
        suspended: bool = False,
        tombstone: bool = False,
    ) -> SupervisorSpecRow:
        """A new version after `parent` (the version the change was decided on, 0: none);
        Raced if another was appended after it meanwhile."""
        row = SupervisorSpecRow(
            supervisor_id=supervisor_id,
            datasource=datasource,
            payload=payload,
            created_at=created_at,
            parent_id=parent,
            suspended=suspended,
            tombstone=tombstone,
        )
        self.session.add(row)
        try:
            self.session.flush()
        except IntegrityError:
            raise Raced(f"[{supervisor_id}] changed meanwhile; try again") from None
        return row


AUTOSCALER = "autoscaler"  # the audit log's action (and author) of an autoscaler decision
DECISIONS_KEPT = 20  # autoscaler decisions the status, or a history entry, shows at most


class AuditRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def entries(self, key: str, action: str, since: datetime, newest: int) -> list[AuditRow]:
        """The `newest` entries of `key` with `action` from `since` on, oldest first."""
        query = (
            select(AuditRow)
            .where(
                AuditRow.audit_key == key,
                AuditRow.action == action,
                AuditRow.created_at >= since,
            )
            .order_by(AuditRow.id.desc())
            .limit(newest)
        )
        return list(reversed(list(self.session.scalars(query))))

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


class SegmentRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def existing_ids(self, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        query = select(SegmentRow.id).where(SegmentRow.id.in_(ids))
        return set(self.session.scalars(query))

    def paths(self, ids: list[str]) -> dict[str, str]:
        """The stored file of each of these segments that exists."""
        if not ids:
            return {}
        query = select(SegmentRow.id, SegmentRow.path).where(SegmentRow.id.in_(ids))
        return {row[0]: row[1] for row in self.session.execute(query)}

    def insert(self, rows: list[SegmentRow]) -> None:
        self.session.add_all(rows)
        self.session.flush()

    def datasources(self) -> list[str]:
        """Datasources with at least one used segment."""
        query = select(SegmentRow.datasource).where(SegmentRow.used.is_(True)).distinct()
        return sorted(self.session.scalars(query))

    def used(self, datasource: str) -> list[SegmentRow]:
        query = (
            select(SegmentRow)
            .where(SegmentRow.datasource == datasource, SegmentRow.used.is_(True))
            .order_by(SegmentRow.interval_start, SegmentRow.id)
        )
        return list(self.session.scalars(query))


class AutoscalerRepository:
    """The autoscaler's task count of each supervisor, and its decisions (newest last)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, supervisor_id: str) -> AutoscalerRow | None:
        return self.session.get(AutoscalerRow, supervisor_id, populate_existing=True)

    def record(
        self,
        supervisor_id: str,
        task_count: int,
        decision: dict[str, Any],
        now: datetime,
        kept: int,
    ) -> None:
        row = self.get(supervisor_id)
        if row is None:
            row = AutoscalerRow(supervisor_id=supervisor_id, decisions={"decisions": []})
            self.session.add(row)
        decisions = [*row.decisions.get("decisions", []), decision][-kept:]
        row.task_count, row.decisions, row.updated_at = task_count, {"decisions": decisions}, now
        self.session.flush()

    def forget(self, supervisor_id: str) -> None:
        row = self.get(supervisor_id)
        if row is not None:
            self.session.delete(row)
            self.session.flush()
