"""What keeps the datasources' tables bounded over months, run by the leader every
`SLUICEGATE_COORDINATOR_PERIOD_S` (`MaintenanceDuty`):

- **Snapshot expiry.** Every publish is a snapshot, and a table's metadata file lists them
  all: a supervisor publishing every 5 s adds 17,000 a day. Snapshots older than
  `SLUICEGATE_SNAPSHOT_RETENTION` (PT1H) are expired (Iceberg's expireSnapshots), except the
  current one, the newest `SNAPSHOTS_KEPT`, and each supervisor's newest publish (its
  committed offsets stay auditable from the table). Time travel reaches back that far. The
  files only they named go once the expiry commits; a data file only when no segment row
  names it (an unused segment's file stays for markUsed until a kill).
- **Automatic kill** (Druid's `druid.coordinator.kill.*`), when `SLUICEGATE_KILL_ON`: every
  `SLUICEGATE_KILL_PERIOD_S`, the unused segments marked unused over
  `SLUICEGATE_KILL_BUFFER_PERIOD` ago (P30D) whose interval ended over
  `SLUICEGATE_KILL_DURATION_TO_RETAIN` ago (P90D; empty: any) are killed.
- **Orphan files** (Iceberg's removeOrphanFiles), every hour (or every orphan file age, if
  shorter): files under a table's location
  that nothing names, written over `SLUICEGATE_ORPHAN_FILE_AGE` (P1D) ago (lake/orphans.py).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from pyiceberg.table import Table
from sqlalchemy import select
from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.db.engine import SessionFactory
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import SegmentRow
from supervisor.db.retention import SegmentStates
from supervisor.errors import NotLeading
from supervisor.lake.expiry import expire
from supervisor.lake.holdings import tables
from supervisor.lake.orphans import remove_orphans
from supervisor.lake.tables import SUMMARY_SUPERVISOR, Lake
from supervisor.loop import Loop
from supervisor.model.fence import Fence
from supervisor.model.retention import minus
from supervisor.services.duties import each_datasource
from supervisor.services.kill import MAX_KILL, Kill, KillService
from supervisor.settings import Settings
from tasks.spec.periods import parse_period

log = logging.getLogger(__name__)
SNAPSHOTS_KEPT = 10
ORPHANS_EVERY_S = 3600.0
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def expired_snapshots(table: Table, before_ms: int) -> set[int]:
    """The snapshots of `table` an expiry at `before_ms` takes: older than it, and none of
    the current one, the newest SNAPSHOTS_KEPT, or any supervisor's newest."""
    snapshots = sorted(table.snapshots(), key=lambda s: (s.timestamp_ms, s.sequence_number or 0))
    keep = {s.snapshot_id for s in snapshots[-SNAPSHOTS_KEPT:]}
    current = table.current_snapshot()
    if current is not None:
        keep.add(current.snapshot_id)
    newest: dict[str, int] = {}
    for snapshot in snapshots:
        summary = snapshot.summary
        supervisor = summary.get(SUMMARY_SUPERVISOR) if summary is not None else None
        if supervisor:
            newest[supervisor] = snapshot.snapshot_id
    keep |= set(newest.values())
    return {s.snapshot_id for s in snapshots if s.timestamp_ms < before_ms} - keep


def rowless(session: Session, paths: set[str]) -> set[str]:
    """Of these files, those no segment row names (a killed or replaced segment's)."""
    named: set[str] = set()
    listed = sorted(paths)
    for start in range(0, len(listed), 500):
        chunk = listed[start : start + 500]
        named.update(session.scalars(select(SegmentRow.path).where(SegmentRow.path.in_(chunk))))
    return paths - named


class MaintenanceDuty(Loop):
    name = "table-maintenance"

    def __init__(
        self, sessions: SessionFactory, lake: Lake, fence: Fence, clock: Clock, settings: Settings
    ) -> None:
        self.sessions = sessions
        self.lake = lake
        self.fence = fence
        self.clock = clock
        self.settings = settings
        self.killed_at = time.monotonic()  # the first automatic kill a kill period after start
        self.swept_at = time.monotonic()
        super().__init__(settings.coordinator_period_s)

    def run_once(self) -> None:
        try:
            self.expire()
        except NotLeading:
            raise
        except Exception:  # the orphans and the kill still run
            log.exception("snapshot expiry failed")
        age = parse_period(self.settings.orphan_file_age)
        age_s = (EPOCH - minus(EPOCH, age)).total_seconds()
        every = min(ORPHANS_EVERY_S, max(self.every_s, age_s))
        if time.monotonic() - self.swept_at >= every:
            self.swept_at = time.monotonic()
            self.remove_orphans()
        if (
            self.settings.kill_on
            and time.monotonic() - self.killed_at >= self.settings.kill_period_s
        ):
            self.killed_at = time.monotonic()
            self.kill()

    def expire(self) -> dict[str, int]:
        """Each table's snapshots past the retention expired; how many, by datasource."""
        retention = parse_period(self.settings.snapshot_retention)
        before_ms = int(minus(self.clock(), retention).timestamp() * 1000)
        with self.sessions() as session:
            names = sorted(tables(session))

        def work(session: Session, datasource: str, epoch: int | None) -> int:
            if epoch is not None:
                LeaseRepository(session).require(epoch)
            expired = expire(
                self.lake,
                session,
                datasource,
                lambda table: expired_snapshots(table, before_ms),
                lambda free: rowless(session, free),
            )
            return len(expired.snapshots)

        return each_datasource(self.sessions, self.fence, names, work, "snapshot expiry")

    def remove_orphans(self) -> dict[str, int]:
        """Each table's orphan files older than SLUICEGATE_ORPHAN_FILE_AGE, deleted."""
        storage = self.settings.storage()
        older = minus(self.clock(), parse_period(self.settings.orphan_file_age)).timestamp()
        with self.sessions() as session:
            names = sorted(tables(session))

        def work(session: Session, datasource: str, _epoch: int | None) -> int:
            return len(remove_orphans(self.lake, storage, session, datasource, older))

        return each_datasource(self.sessions, self.fence, names, work, "orphan-file removal")

    def kill(self) -> dict[str, int]:
        """Unused segments past the buffer period and the duration to retain, killed."""
        now = self.clock()
        changed_before = minus(now, parse_period(self.settings.kill_buffer_period))
        retain = self.settings.kill_duration_to_retain
        ended_by = minus(now, parse_period(retain)) if retain else datetime.max.replace(tzinfo=UTC)
        with self.sessions() as session:
            names = SegmentStates(session).datasources_with_unused()

        def work(session: Session, datasource: str, epoch: int | None) -> int:
            kill = Kill(
                f"auto-kill-{datasource}",
                datasource,
                (EARLIEST, ended_by),
                None,
                MAX_KILL,
                changed_before,
            )
            return len(KillService(session, self.lake, now).kill(kill, epoch))

        done = each_datasource(self.sessions, self.fence, names, work, "the automatic kill")
        for datasource, count in done.items():
            log.info("%s: %d unused segments killed", datasource, count)
        return done
