"""Datasources' compaction configs (Druid's coordinator compaction config API), audited, and
their compaction status as the tables hold them now."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from supervisor.db.repositories import AuditRepository
from supervisor.db.retention import CompactionConfigs, DynamicConfigs
from supervisor.errors import BadRequestError, NotFoundError
from supervisor.lake.tables import Lake
from supervisor.model import compaction_slots as slots
from supervisor.model.compaction import CompactionConfig, parse_config, supervisor_form
from supervisor.model.retention import RuleError
from supervisor.services.compaction import plan
from supervisor.services.supervisors import Actor

AUDIT_TYPE = "compaction"
CLUSTER_KEY = "_cluster"  # the audit key of the cluster's compaction config


class CompactionConfigService:
    def __init__(self, session: Session, lake: Lake, now: datetime) -> None:
        self.session = session
        self.lake = lake
        self.now = now
        self.configs = CompactionConfigs(session)

    def cluster(self, max_tasks: int) -> dict[str, Any]:
        """Druid's GET of the compaction config: every datasource's, and the cluster's fields
        (maxCompactionTaskSlots as it applies: the operator's SLUICEGATE_MAX_COMPACTION_TASKS
        unless set here)."""
        configs = list(self.configs.all().values())
        return {"compactionConfigs": configs, **slots.answer(self.cluster_config(), max_tasks)}

    def cluster_config(self) -> slots.ClusterCompaction:
        return slots.stored(DynamicConfigs(self.session).get(slots.NAME))

    def set_cluster(self, raw: object, actor: Actor) -> None:
        """Druid's update of the cluster compaction config: the fields given change, the others
        stay; audited."""
        try:
            config = slots.parse_cluster(raw, self.cluster_config())
        except RuleError as exc:
            raise BadRequestError(str(exc), field=exc.field) from None
        self._set_cluster(config, actor)

    def set_task_slots(self, ratio: object, max_slots: object, actor: Actor) -> None:
        """Druid's older taskslots route: `ratio` and `max` as query parameters (either may
        be left out: it stays)."""
        config = self.cluster_config()
        try:
            if ratio is not None:
                config = replace(config, ratio=slots.slot_ratio(_number(ratio), "ratio"))
            if max_slots is not None:
                config = replace(config, max_slots=slots.slot_count(_whole(max_slots), "max"))
        except RuleError as exc:
            raise BadRequestError(str(exc), field=exc.field) from None
        self._set_cluster(config, actor)

    def _set_cluster(self, config: slots.ClusterCompaction, actor: Actor) -> None:
        stored = slots.as_dict(config)
        DynamicConfigs(self.session).put(slots.NAME, stored, self.now)
        self._audit(CLUSTER_KEY, "update", stored, actor)

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


def _number(text: object) -> object:
    """A query parameter's number (the text itself when it is none: refused by the check)."""
    try:
        return float(str(text))
    except ValueError:
        return text


def _whole(text: object) -> object:
    try:
        return int(str(text))
    except ValueError:
        return text
