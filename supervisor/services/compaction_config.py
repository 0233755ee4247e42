"""Datasources' compaction configs (Druid's coordinator compaction config API), audited, and
their compaction status as the tables hold them now."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from supervisor.db.repositories import AuditRepository
from supervisor.db.retention import CompactionConfigs
from supervisor.errors import BadRequestError, NotFoundError
from supervisor.lake.tables import Lake
from supervisor.model.compaction import CompactionConfig, parse_config, supervisor_form
from supervisor.model.retention import RuleError
from supervisor.services.compaction import plan
from supervisor.services.supervisors import Actor

AUDIT_TYPE = "compaction"
# what Druid's cluster compaction config answers besides the datasources' configs: one policy,
# and the compact tasks that run at once (maxCompactionTaskSlots: SLUICEGATE_MAX_COMPACTION_TASKS)
CLUSTER = {
    "compactionTaskSlotRatio": 0.1,
    "useAutoScaleSlots": False,
    "engine": "native",
    "compactionPolicy": {"type": "newestSegmentFirst"},
}


class CompactionConfigService:
    def __init__(self, session: Session, lake: Lake, now: datetime) -> None:
        self.session = session
        self.lake = lake
        self.now = now
        self.configs = CompactionConfigs(session)

    def cluster(self, max_tasks: int) -> dict[str, Any]:
        configs = list(self.configs.all().values())
        return {"compactionConfigs": configs, **CLUSTER, "maxCompactionTaskSlots": max_tasks}

    def get(self, datasource: str) -> dict[str, Any]:
        found = self.configs.get(datasource)
        if found is None:
            raise NotFoundError(f"no compaction config for datasource [{datasource}]")
        return found

    def put(self, raw: object, actor: Actor) -> None:
        """The config API's write: a suspended compaction stays suspended."""
        try:
            config = parse_config(raw)
        except RuleError as exc:
            raise BadRequestError(str(exc), field=exc.field) from None
        self.write(config, None, actor)

    def write(self, config: CompactionConfig, suspended: bool | None, actor: Actor) -> None:
        """The config, and whether it is suspended (None: as it was), audited in its
        autocompact supervisor's form (its history)."""
        before = self.configs.row(config.datasource)
        was = None if before is None else before.suspended
        row = self.configs.put(config.datasource, config.raw, self.now, suspended)
        if was is None:
            action = "create"
        elif was != row.suspended:
            action = "suspend" if row.suspended else "resume"
        else:
            action = "update"
        self._audit(config.datasource, action, supervisor_form(config.raw, row.suspended), actor)

    def delete(self, datasource: str, actor: Actor) -> None:
        if not self.configs.delete(datasource):
            raise NotFoundError(f"no compaction config for datasource [{datasource}]")
        self._audit(datasource, "delete", {}, actor)

    def status(self, datasource: str | None) -> list[dict[str, Any]]:
        """Druid's AutoCompactionSnapshot of each configured datasource (or of one);
        scheduleStatus NOT_ENABLED while its compaction is suspended."""
        rows = self.configs.rows()
        if datasource is not None:
            rows = [row for row in rows if row.datasource == datasource]
            if not rows:
                raise NotFoundError(f"no compaction config for datasource [{datasource}]")
        found = []
        for row in rows:
            snapshot = plan(self.session, self.lake, parse_config(row.config)).status(
                row.datasource
            )
            if row.suspended:
                snapshot["scheduleStatus"] = "NOT_ENABLED"
            found.append(snapshot)
        return found

    def _audit(self, datasource: str, action: str, payload: dict[str, Any], actor: Actor) -> None:
        AuditRepository(self.session).add(
            datasource,
            AUDIT_TYPE,
            action,
            actor.author,
            actor.comment,
            actor.remote_address,
            payload,
            self.now,
        )
