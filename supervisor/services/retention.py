"""Retention: Druid's rules per datasource, segments marked unused or used again, and the
rules applied by the leader (supervisor/leading.py's RetentionDuty).

A segment is used while its row says so and the datasource's Iceberg table holds its file.
Marking segments unused takes their files out of the table in one snapshot (every reader
stops seeing them at once) and flags their rows, in one fenced transaction; their files stay
in deep storage until a kill. Marking them used again adds the files back as a snapshot."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.db.engine import SessionFactory
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import SegmentRow
from supervisor.db.repositories import AuditRepository
from supervisor.db.retention import RulesRepository, SegmentStates
from supervisor.errors import BadRequestError, Raced
from supervisor.lake.holdings import live_files, tables
from supervisor.lake.rewrite import remove, replace
from supervisor.lake.tables import SUMMARY_EPOCH, SUMMARY_OPERATION, Lake, published
from supervisor.loop import Loop
from supervisor.model.fence import Fence
from supervisor.model.retention import (
    DEFAULT,
    DEFAULT_RULES,
    RuleError,
    first_match,
    parse_interval,
    parse_rules,
)
from supervisor.services.duties import each_datasource
from supervisor.services.supervisors import Actor

log = logging.getLogger(__name__)

RULES_AUDIT = "rules"  # the audit log's type of a rules change (Druid's)
MAX_IDS = 10_000


@dataclass(frozen=True)
class Selection:
    """Which segments a markUsed / markUnused names: ids, or those within an interval."""

    ids: list[str] | None = None
    interval: tuple[datetime, datetime] | None = None


def selection(raw: object) -> Selection:
    """Druid's SegmentsToUpdateFilter: `{"interval": "a/b"}` or `{"segmentIds": [...]}`,
    exactly one of them."""
    if not isinstance(raw, dict):
        raise BadRequestError("body: a JSON object with interval or segmentIds", field="body")
    given = [key for key in ("interval", "segmentIds") if raw.get(key) is not None]
    if len(given) != 1:
        raise BadRequestError("body: give exactly one of interval and segmentIds", field="interval")
    if given[0] == "interval":
        try:
            return Selection(interval=parse_interval(raw["interval"], "interval"))
        except RuleError as exc:
            raise BadRequestError(str(exc), field=exc.field) from None
    ids = raw["segmentIds"]
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise BadRequestError("segmentIds: must be an array of segment ids", field="segmentIds")
    if not ids or len(ids) > MAX_IDS:
        raise BadRequestError(f"segmentIds: 1 to {MAX_IDS} ids", field="segmentIds")
    return Selection(ids=list(dict.fromkeys(ids)))


class RetentionService:
    def __init__(self, session: Session, lake: Lake, now: datetime) -> None:
        self.session = session
        self.lake = lake
        self.now = now
        self.rules_repo = RulesRepository(session)
        self.states = SegmentStates(session)

    # ---- rules -----------------------------------------------------------------------------

    def rules(self, datasource: str, full: bool = False) -> list[dict[str, Any]]:
        own = self.rules_repo.get(datasource)
        if datasource == DEFAULT:
            return DEFAULT_RULES if own is None else own
        own = own or []
        return [*own, *self.rules(DEFAULT)] if full else own

    def all_rules(self) -> dict[str, list[dict[str, Any]]]:
        found = self.rules_repo.all()
        found.setdefault(DEFAULT, DEFAULT_RULES)
        return found

    def set_rules(self, datasource: str, raw: object, actor: Actor) -> None:
        try:
            parse_rules(raw)
        except RuleError as exc:
            raise BadRequestError(str(exc), field=exc.field) from None
        assert isinstance(raw, list)
        self.rules_repo.put(datasource, raw, self.now)
        AuditRepository(self.session).add(
            datasource,
            RULES_AUDIT,
            "update",
            actor.author,
            actor.comment,
            actor.remote_address,
            {"rules": raw},
            self.now,
        )

    # ---- marking ---------------------------------------------------------------------------

    def mark_unused(
        self, datasource: str, which: Selection, epoch: int | None, why: str = "markUnused"
    ) -> int:
        """Take the selected used segments out of the table and flag them unused; how many."""
        rows = self._live(datasource, which)
        return self._unuse(datasource, rows, epoch, why)

    def _unuse(self, datasource: str, rows: list[SegmentRow], epoch: int | None, why: str) -> int:
        if not rows:
            return 0
        # the rows first: their locks (on PostgreSQL) order this change with a markUsed or a
        # kill of the same segments, and one that changed them meanwhile makes this a retry
        if self.states.mark([row.id for row in rows], False, self.now) != len(rows):
            raise Raced(f"segments of {datasource} changed meanwhile")
        summary = self._summary(why, epoch)
        remove(self.lake, self.session, datasource, {row.path for row in rows}, summary)
        return len(rows)

    def mark_used(self, datasource: str, which: Selection, epoch: int | None) -> int:
        """Put the selected unused segments back in the table and flag them used; how many.
        (A killed segment is gone: it has no row left to mark.)"""
        rows = self.states.of(datasource, False, which.ids, which.interval)
        if not rows:
            return 0
        if self.states.mark([row.id for row in rows], True, self.now) != len(rows):
            raise Raced(f"segments of {datasource} changed meanwhile")  # (killed, say)
        held = live_files(self.lake, self.session, datasource) or set()
        files = [
            (row.path, row.size_bytes, row.interval_start.isoformat(), row.interval_end.isoformat())
            for row in rows
            if row.path not in held
        ]
        back = published(datasource, files, self._summary("markUsed", epoch))
        if files and self.lake.exists(self.session, datasource):
            # each file under its own interval's partitioning (a compacted month's, say),
            # the table's own kept
            replace(self.lake, self.session, back, set())
        elif files:
            self.lake.append(self.session, back)
        return len(rows)

    def _live(self, datasource: str, which: Selection) -> list[SegmentRow]:
        held = live_files(self.lake, self.session, datasource) or set()
        rows = self.states.of(datasource, True, which.ids, which.interval)
        return [row for row in rows if row.path in held]

    def _summary(self, operation: str, epoch: int | None) -> dict[str, str]:
        summary = {SUMMARY_OPERATION: operation}
        if epoch is not None:
            summary[SUMMARY_EPOCH] = str(epoch)
        return summary

    # ---- the rules applied -----------------------------------------------------------------

    def apply_rules(self, datasource: str, epoch: int | None) -> int:
        """The datasource's used segments that a drop rule is the first to apply to (its own
        rules, then the default ones), marked unused in one snapshot; how many."""
        own = self.rules_repo.get(datasource) if datasource != DEFAULT else None
        rules = [*parse_rules(own or []), *parse_rules(self.rules(DEFAULT))]
        if not any(rule.drops for rule in rules):
            return 0
        doomed = []
        for row in self._live(datasource, Selection()):
            rule = first_match(rules, row.interval_start, row.interval_end, self.now)
            if rule is not None and rule.drops:
                doomed.append(row)
        if doomed and epoch is not None:
            LeaseRepository(self.session).require(epoch)
        return self._unuse(datasource, doomed, epoch, "retention")


class RetentionDuty(Loop):
    """The rules applied to every datasource with a table, every `every_s` while this overlord
    leads (Druid's coordinator run), a transaction per datasource."""

    name = "retention"

    def __init__(
        self, sessions: SessionFactory, lake: Lake, fence: Fence, clock: Clock, every_s: float
    ) -> None:
        self.sessions = sessions
        self.lake = lake
        self.fence = fence
        self.clock = clock
        super().__init__(every_s)

    def run_once(self) -> None:
        self.apply()

    def apply(self) -> dict[str, int]:
        """One run: how many segments each datasource's rules dropped."""
        with self.sessions() as session:
            names = sorted(tables(session))

        def work(session: Session, datasource: str, epoch: int | None) -> int:
            return RetentionService(session, self.lake, self.clock()).apply_rules(datasource, epoch)

        dropped = each_datasource(self.sessions, self.fence, names, work, "its retention rules")
        for datasource, count in dropped.items():
            log.info("%s: %d segments dropped by its retention rules", datasource, count)
        return dropped
