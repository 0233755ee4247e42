"""Druid's compaction supervisors: each datasource's compaction config is also the supervisor
`autocompact__<dataSource>` (`"type": "autocompact"` on the supervisor API), as in Druid with
compaction supervisors on. Submitting one sets the config; suspending it stops the
datasource's compaction (the config stays); terminating it deletes the config. Its status is
the datasource's AutoCompactionSnapshot; its history is the config's audit trail."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from supervisor.clock import druid_timestamp
from supervisor.db.models import AuditRow, CompactionConfigRow
from supervisor.errors import BadRequestError, NotFoundError
from supervisor.lake.tables import Lake
from supervisor.model.access import Action
from supervisor.model.compaction import (
    AUTOCOMPACT,
    datasource_of,
    parse_config,
    parse_supervisor,
    supervisor_form,
    supervisor_id,
)
from supervisor.model.retention import RuleError
from supervisor.services.compaction_config import AUDIT_TYPE, CompactionConfigService
from supervisor.services.supervisors import TOMBSTONE_TYPE, Actor

RUNNING, SUSPENDED = "RUNNING", "SUSPENDED"
NOT_SUPPORTED = "not supported for 'autocompact' supervisors"


class CompactionSupervisors:
    def __init__(self, session: Session, lake: Lake, now: datetime) -> None:
        self.session = session
        self.configs = CompactionConfigService(session, lake, now)

    def submit(self, raw: object, actor: Actor) -> str:
        try:
            found = parse_supervisor(raw)
        except RuleError as exc:
            raise BadRequestError(str(exc), field=exc.field) from None
        actor.require(found.config.datasource, Action.WRITE)
        self.configs.write(found.config, found.suspended, actor)
        return found.id

    def spec(self, supervisor: str) -> dict[str, Any]:
        row = self._require(supervisor)
        return supervisor_form(dict(row.config), row.suspended)

    def set_suspended(self, supervisor: str, suspended: bool, actor: Actor) -> dict[str, Any]:
        row = self._require(supervisor)
        if row.suspended == suspended:
            word = "suspended" if suspended else "running"
            raise BadRequestError(f"[{supervisor}] is already {word}")
        self.configs.write(parse_config(row.config), suspended, actor)
        return supervisor_form(dict(row.config), suspended)

    def terminate(self, supervisor: str, actor: Actor) -> None:
        self.configs.delete(self._require(supervisor).datasource, actor)

    def for_all(self, actor: Actor, suspended: bool | None) -> None:
        """Suspend (True), resume (False) or terminate (None) each one the actor may write."""
        for row in self.configs.configs.rows():
            if not actor.may(row.datasource, Action.WRITE):
                continue
            if suspended is None:
                self.configs.delete(row.datasource, actor)
            elif row.suspended != suspended:
                self.set_suspended(supervisor_id(row.datasource), suspended, actor)

    def status(self, supervisor: str, now: datetime) -> dict[str, Any]:
        """Druid's report: the AutoCompactionSnapshot (scheduleStatus NOT_ENABLED while
        suspended) and, as a streaming supervisor's report has them, its state."""
        row = self._require(supervisor)
        snapshot = self.configs.status(row.datasource)[0] | states(row.suspended)
        return {"id": supervisor, "generationTime": druid_timestamp(now), "payload": snapshot}

    def rows(self, readable: Callable[[str], bool]) -> list[CompactionConfigRow]:
        return [row for row in self.configs.configs.rows() if readable(row.datasource)]

    def history(self, supervisor: str, count: int) -> list[dict[str, Any]]:
        """The config's versions, newest first, as a supervisor's history answers them."""
        datasource = datasource_of(supervisor)
        query = (
            select(AuditRow)
            .where(AuditRow.audit_key == datasource, AuditRow.type == AUDIT_TYPE)
            .order_by(AuditRow.id.desc())
            .limit(count)
        )
        found = [_version(row) for row in self.session.scalars(query)] if datasource else []
        if not found:  # its audit rows expired (AUDIT_RETENTION): the current version
            row = self._require(supervisor)
            form = supervisor_form(dict(row.config), row.suspended)
            found = [{"spec": form, "version": druid_timestamp(row.updated_at)}]
        return found

    def _require(self, supervisor: str) -> CompactionConfigRow:
        datasource = datasource_of(supervisor)
        row = None if datasource is None else self.configs.configs.row(datasource)
        if row is None:
            raise NotFoundError(f"[{supervisor}] does not exist")
        return row


def states(suspended: bool) -> dict[str, Any]:
    state = SUSPENDED if suspended else RUNNING
    return {"state": state, "detailedState": state, "healthy": True}


def summary(row: CompactionConfigRow, *, spec: bool, system: bool) -> dict[str, Any]:
    """Its entry in the supervisor list (?state=true, ?full, ?system), as the streaming
    supervisors' entries are."""
    entry: dict[str, Any] = {
        "id": supervisor_id(row.datasource),
        **states(row.suspended),
        "dataSource": row.datasource,
        "suspended": row.suspended,
    }
    form = supervisor_form(dict(row.config), row.suspended)
    if spec:
        entry["spec"] = form
    if system:
        entry |= {"type": AUTOCOMPACT, "source": None, "specString": _text(form)}
    return entry


def _version(row: AuditRow) -> dict[str, Any]:
    payload = dict(row.payload or {})
    if row.action == "delete":
        spec: dict[str, Any] = {
            "type": TOMBSTONE_TYPE,
            "id": supervisor_id(row.audit_key),
            "dataSources": [row.audit_key],
            "suspended": False,
        }
    elif payload.get("type") == AUTOCOMPACT:
        spec = payload
    else:  # written before compaction supervisors: the config alone, which ran
        spec = supervisor_form(payload, False)
    return {"spec": spec, "version": druid_timestamp(row.created_at)}


def _text(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))
