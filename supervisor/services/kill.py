"""Druid's kill task: an interval's unused segments deleted for good, their rows and files.

On the table, a kill expires every snapshot that still holds one of those files (time travel
to them would find the file gone) and deletes, once that commits, the files no kept snapshot
names (lake/expiry.py). Used segments are never touched: a segment must be marked unused
first (by hand or by a drop rule). The kill runs on the leader within the submitting request,
in one transaction that checks the epoch, and is recorded as a `kill` task that has ended
(its report lists the segments it deleted)."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import druid_timestamp
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import SegmentRow, TaskRow
from supervisor.db.retention import SegmentStates
from supervisor.db.tasks import TaskRepository
from supervisor.errors import BadRequestError, Raced
from supervisor.lake.append import manifests_of
from supervisor.lake.catalog import after_commit
from supervisor.lake.expiry import data_files, delete_files, expire
from supervisor.lake.holdings import live_files, live_paths
from supervisor.lake.tables import Lake
from supervisor.model.access import Action
from supervisor.model.retention import RuleError, parse_interval, parse_time
from supervisor.services.supervisors import Actor
from tasks.protocol import TaskStatusCode
from tasks.spec.names import name_problem, task_id_problem

log = logging.getLogger(__name__)
MAX_KILL = 100_000  # segments one kill deletes at most (its `limit`, if lower)
_FIELDS = {
    "type",
    "id",
    "dataSource",
    "interval",
    "versions",
    "context",
    "batchSize",
    "limit",
    "maxUsedStatusLastUpdatedTime",
}


@dataclass(frozen=True)
class Kill:
    id: str
    datasource: str
    interval: tuple[datetime, datetime]
    versions: list[str] | None = None
    limit: int = MAX_KILL
    changed_before: datetime | None = None  # only segments marked unused before this


def parse_kill(raw: dict[str, Any], now: datetime) -> Kill:
    """Druid's kill task spec; BadRequestError naming the field that is wrong."""
    unknown = set(raw) - _FIELDS
    if unknown:
        field = sorted(unknown)[0]
        raise BadRequestError(f"{field}: not a field of a kill task", field=field)
    datasource = raw.get("dataSource")
    if not isinstance(datasource, str):
        raise BadRequestError("dataSource: must be a string", field="dataSource")
    problem = name_problem(datasource)
    if problem is not None:
        raise BadRequestError(f"dataSource: {problem}", field="dataSource")
    try:
        interval = parse_interval(raw.get("interval"), "interval")
        before = raw.get("maxUsedStatusLastUpdatedTime")
        changed_before = (
            None if before is None else parse_time(before, "maxUsedStatusLastUpdatedTime")
        )
    except RuleError as exc:
        raise BadRequestError(str(exc), field=exc.field) from None
    versions = raw.get("versions")
    if versions is not None and (
        not isinstance(versions, list) or not all(isinstance(v, str) for v in versions)
    ):
        raise BadRequestError("versions: an array of segment versions", field="versions")
    limit = raw.get("limit")
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit <= MAX_KILL
    ):
        raise BadRequestError(f"limit: 1 to {MAX_KILL}", field="limit")
    task_id = raw.get("id")
    if task_id is None:
        start, end = (druid_timestamp(t) for t in interval)
        nonce, at = secrets.token_hex(4), druid_timestamp(now)
        task_id = f"api-issued_kill_{datasource}_{nonce}_{start}_{end}_{at}"
        if len(task_id) > 255:  # a long datasource name: Druid's parts, the name cut short
            task_id = f"api-issued_kill_{datasource[:100]}_{nonce}_{start}_{end}_{at}"
    problem = task_id_problem(task_id) if isinstance(task_id, str) else "must be a string"
    if problem is not None:
        raise BadRequestError(f"id: {problem}", field="id")
    return Kill(task_id, datasource, interval, versions, limit or MAX_KILL, changed_before)


class KillService:
    def __init__(self, session: Session, lake: Lake, now: datetime) -> None:
        self.session = session
        self.lake = lake
        self.now = now
        self.states = SegmentStates(session)

    def submit(self, raw: dict[str, Any], actor: Actor, epoch: int | None) -> str:
        """Run a kill task now and record it; its id."""
        kill = parse_kill(raw, self.now)
        actor.require(kill.datasource, Action.WRITE)
        tasks = TaskRepository(self.session)
        if tasks.get(kill.id) is not None:
            raise BadRequestError(f"Task [{kill.id}] already exists", field="id")
        killed = self.kill(kill, epoch)
        self.session.add(
            TaskRow(
                id=kill.id,
                type="kill",
                supervisor_id=None,
                datasource=kill.datasource,
                group_id=None,
                payload={**raw, "id": kill.id},
                status=TaskStatusCode.SUCCESS,
                created_at=self.now,
                updated_at=self.now,
                report={"status": "SUCCESS", "segments": killed},
            )
        )
        self.session.flush()
        return kill.id

    def kill(self, kill: Kill, epoch: int | None) -> list[str]:
        """Delete the interval's unused segments (their rows now, their files once this
        transaction commits); the ids deleted."""
        if epoch is not None:
            LeaseRepository(self.session).require(epoch)
        rows = self.states.of(kill.datasource, False, within=kill.interval)
        held = live_files(self.lake, self.session, kill.datasource) or set()
        doomed = [
            row
            for row in rows
            if row.path not in held  # (never a file the table holds)
            and (kill.versions is None or row.version in kill.versions)
            and (
                kill.changed_before is None
                or (row.used_status_last_updated or row.created_at) < kill.changed_before
            )
        ][: kill.limit]
        if not doomed:
            return []
        return self._delete(kill.datasource, doomed)

    def _delete(self, datasource: str, doomed: list[SegmentRow]) -> list[str]:
        paths = {row.path for row in doomed}
        # the rows first, still unused: their locks (on PostgreSQL) order this kill with a
        # markUsed of the same segments, and one that got there first makes this a retry
        if self.states.forget([row.id for row in doomed], unused_only=True) != len(doomed):
            raise Raced(f"segments of {datasource} changed while being killed")
        if paths & (live_files(self.lake, self.session, datasource) or set()):
            raise Raced(f"segments of {datasource} are in its table again")

        def holding(table: Any) -> set[int]:  # the snapshots that still name one of them
            found = set()
            for snapshot in table.snapshots():
                for manifest in manifests_of(table.io, snapshot):
                    if paths.intersection(live_paths(table.io, manifest)):
                        found.add(snapshot.snapshot_id)
                        break
            return found

        expired = expire(self.lake, self.session, datasource, holding, lambda free: free & paths)
        # those no snapshot names at all (as the table is after the expiry) go too
        left = paths - set(expired.data_files) - self._named(datasource)
        if left:
            io = self.lake.catalog._load_file_io(location=self.lake.location)
            after_commit(self.session, lambda: log_failed(delete_files(io, sorted(left))))
        return [row.id for row in doomed]

    def _named(self, datasource: str) -> set[str]:
        """Every data file a snapshot of the table names, as this transaction has it."""
        ident = self.lake.identifier(datasource)
        location = self.lake.catalog.location_of(self.session, ident)
        if location is None:
            return set()
        table = self.lake.catalog.table_at(ident, location)
        return data_files(table.io, table.snapshots())


def log_failed(failed: int) -> None:
    if failed:
        log.warning(
            "%d killed segment files not deleted (the orphan-file removal takes them)", failed
        )
