"""Retention rules, and segments' used state (what marking them used or unused, the rules and
kill read and write)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from supervisor.db.models import (
    AuditRow,
    CompactionConfigRow,
    DynamicConfigRow,
    IntentRow,
    RetentionRulesRow,
    SegmentRow,
    TaskRow,
    WorkerRow,
)
from tasks.protocol import TaskStatusCode

ENDED = (TaskStatusCode.SUCCESS, TaskStatusCode.FAILED)

Row = TypeVar("Row")


def _upsert(
    session: Session,
    model: type[Row],
    key: tuple[str, str],
    values: dict[str, Any],
    new: dict[str, Any] | None = None,
) -> Row:
    """The row of `model` whose primary key (`key`: its column, its value) is given, with
    `values` set: made when there is none, with `new`'s values where `values` has none."""
    row = session.get(model, key[1])
    if row is None:
        row = model(**{key[0]: key[1], **(new or {}), **values})
        session.add(row)
    else:
        for name, value in values.items():
            setattr(row, name, value)
    session.flush()
    return row


class RulesRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, datasource: str) -> list[dict[str, Any]] | None:
        row = self.session.get(RetentionRulesRow, datasource, populate_existing=True)
        return None if row is None else list(row.rules)

    def all(self) -> dict[str, list[dict[str, Any]]]:
        rows = self.session.scalars(select(RetentionRulesRow))
        return {row.datasource: list(row.rules) for row in rows}

    def put(self, datasource: str, rules: list[dict[str, Any]], now: datetime) -> None:
        values = {"rules": rules, "updated_at": now}
        _upsert(self.session, RetentionRulesRow, ("datasource", datasource), values)


class DynamicConfigs:
    """Cluster-wide configs by name (DynamicConfigRow)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, name: str) -> dict[str, Any] | None:
        row = self.session.get(DynamicConfigRow, name, populate_existing=True)
        return None if row is None else dict(row.config)

    def put(self, name: str, config: dict[str, Any], now: datetime) -> None:
        _upsert(
            self.session, DynamicConfigRow, ("name", name), {"config": config, "updated_at": now}
        )


class CompactionConfigs:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, datasource: str) -> dict[str, Any] | None:
        row = self.row(datasource)
        return None if row is None else dict(row.config)

    def row(self, datasource: str) -> CompactionConfigRow | None:
        return self.session.get(CompactionConfigRow, datasource, populate_existing=True)

    def all(self, *, running: bool = False) -> dict[str, dict[str, Any]]:
        """Every datasource's config (`running`: only those whose compaction is not
        suspended)."""
        return {
            row.datasource: dict(row.config)
            for row in self.rows()
            if not (running and row.suspended)
        }

    def rows(self) -> list[CompactionConfigRow]:
        query = select(CompactionConfigRow).order_by(CompactionConfigRow.datasource)
        return list(self.session.scalars(query))

    def put(
        self,
        datasource: str,
        config: dict[str, Any],
        now: datetime,
        suspended: bool | None = None,
    ) -> CompactionConfigRow:
        """`suspended` None: as it was (a new config runs)."""
        values: dict[str, Any] = {"config": config, "updated_at": now}
        if suspended is not None:
            values["suspended"] = suspended
        key = ("datasource", datasource)
        return _upsert(self.session, CompactionConfigRow, key, values, new={"suspended": False})

    def delete(self, datasource: str) -> bool:
        found = self.session.execute(
            delete(CompactionConfigRow).where(CompactionConfigRow.datasource == datasource)
        )
        return bool(found.rowcount)  # type: ignore[attr-defined]


class SegmentStates:
    """Segments by their used flag, and the flag's changes."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def of(
        self,
        datasource: str,
        used: bool,
        ids: list[str] | None = None,
        within: tuple[datetime, datetime] | None = None,
        lock: bool = False,
    ) -> list[SegmentRow]:
        """The datasource's segments that are (un)used, of `ids` or lying within `within`
        (both None: all of them); `lock`: their rows locked for this transaction (PostgreSQL's
        FOR UPDATE; SQLite's one writer lock orders writers anyway)."""
        query = select(SegmentRow).where(
            SegmentRow.datasource == datasource, SegmentRow.used.is_(used)
        )
        if ids is not None:
            query = query.where(SegmentRow.id.in_(ids))
        if within is not None:
            query = query.where(
                SegmentRow.interval_start >= within[0], SegmentRow.interval_end <= within[1]
            )
        query = query.order_by(SegmentRow.interval_start, SegmentRow.id)
        return list(self.session.scalars(query.with_for_update() if lock else query))

    def mark(self, ids: list[str], used: bool, now: datetime) -> int:
        """Flag these segments used (or unused) where they are not yet; how many changed (a
        caller that read them as not yet marked and sees fewer raced another change)."""
        changed = 0
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            found = self.session.execute(
                update(SegmentRow)
                .where(SegmentRow.id.in_(chunk), SegmentRow.used.is_(not used))
                .values(used=used, used_status_last_updated=now)
            )
            changed += found.rowcount  # type: ignore[attr-defined]
        self.session.flush()
        return changed

    def unused_before(self, datasource: str, changed_before: datetime) -> list[SegmentRow]:
        """Unused segments whose flag was last changed before `changed_before`."""
        query = select(SegmentRow).where(
            SegmentRow.datasource == datasource,
            SegmentRow.used.is_(False),
            SegmentRow.used_status_last_updated < changed_before,
        )
        return list(self.session.scalars(query))

    def forget(self, ids: list[str], unused_only: bool = False) -> int:
        """Delete these segments' rows (`unused_only`: those still unused); how many."""
        gone = 0
        for start in range(0, len(ids), 500):
            query = delete(SegmentRow).where(SegmentRow.id.in_(ids[start : start + 500]))
            if unused_only:
                query = query.where(SegmentRow.used.is_(False))
            gone += self.session.execute(query).rowcount  # type: ignore[attr-defined]
        self.session.flush()
        return gone

    def datasources_with_unused(self) -> list[str]:
        query = select(SegmentRow.datasource).where(SegmentRow.used.is_(False)).distinct()
        return sorted(self.session.scalars(query))


class MetadataRetention:
    """Rows past their retention, deleted a batch at a time (a run's transaction stays short;
    the next run takes the rest)."""

    BATCH = 5_000

    def __init__(self, session: Session) -> None:
        self.session = session

    def prune(
        self,
        intents_before: datetime,
        audit_before: datetime,
        tasks_before: datetime,
        workers_before: datetime,
    ) -> dict[str, int]:
        done = {
            "intents": self._delete(
                IntentRow,
                IntentRow.id,
                IntentRow.done_at.is_not(None) & (IntentRow.done_at < intents_before),
            ),
            "audit": self._delete(AuditRow, AuditRow.id, AuditRow.created_at < audit_before),
            "tasks": self._delete(
                TaskRow,
                TaskRow.id,
                TaskRow.status.in_(ENDED) & (TaskRow.updated_at < tasks_before),
            ),
            "workers": self._delete(
                WorkerRow,
                WorkerRow.host,
                WorkerRow.enabled.is_(True) & (WorkerRow.heartbeat_at < workers_before),
            ),
        }
        self.session.flush()
        return done

    def _delete(self, model: Any, key: Any, condition: Any) -> int:
        ids = list(self.session.scalars(select(key).where(condition).limit(self.BATCH)))
        for start in range(0, len(ids), 500):
            self.session.execute(delete(model).where(key.in_(ids[start : start + 500])))
        return len(ids)
