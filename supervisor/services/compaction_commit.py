"""A compact task's commit (its ReplaceAction, on the overlord's task action endpoint): the
files it wrote replace the segments it read, in one transaction that checks the leader's
epoch, or nothing is committed.

In that transaction: the segments it was given must still be used and their files still in
the table (lake/rewrite.py `replace` gives up, Replaced, if one left it; a streaming publish
that appended to the same interval meanwhile is kept), its files must hold exactly the rows
they replace, then one overwrite snapshot (deleting exactly the files read, adding the new),
the new segment rows, the old rows deleted, and the task's report naming what it replaced
(supervisor/services/publish.py tells a late replica of a replaced segment that its range
was published). A task whose commit fails deletes what it wrote."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import SegmentRow, TaskRow
from supervisor.db.retention import SegmentStates
from supervisor.lake.rewrite import Replaced, replace
from supervisor.lake.tables import SUMMARY_EPOCH, SUMMARY_OPERATION, SUMMARY_TASK, Lake, published
from tasks.protocol import CompactTask, PublishOutcome, PublishResult, ReplaceAction

log = logging.getLogger(__name__)


class CompactionCommit:
    def __init__(self, session: Session, lake: Lake, clock: Clock, epoch: int | None) -> None:
        self.session = session
        self.lake = lake
        self.clock = clock
        self.epoch = epoch

    def commit(self, row: TaskRow, act: ReplaceAction) -> PublishResult:
        """The task's files in place of what it read (PUBLISHED), or why not (FAILED); not
        committed here (the route's session is). NotLeading: this overlord no longer leads."""
        task = CompactTask.model_validate(row.payload)
        if (row.report or {}).get("segments") == [s.id for s in act.segments] and act.segments:
            # committed by an attempt whose answer was lost: the files are the segments
            return PublishResult(PublishOutcome.PUBLISHED, "committed by an earlier attempt")
        if act.replaced != task.inputs:
            return _failed("it replaces other segments than the task was given")
        if any(s.dataSource != task.dataSource for s in act.segments):
            return _failed("its segments belong to another datasource")
        if self.epoch is not None:
            LeaseRepository(self.session).require(self.epoch)
        states = SegmentStates(self.session)
        rows = states.of(task.dataSource, True, ids=list(task.inputs))
        if len(rows) != len(task.inputs) or any(r.path != task.inputs[r.id] for r in rows):
            return _failed("segments it read were dropped or replaced meanwhile")
        read, written = sum(r.num_rows for r in rows), sum(s.numRows for s in act.segments)
        if read != written:
            return _failed(f"its files hold {written} rows, not the {read} they replace")
        summary = {SUMMARY_OPERATION: "compact", SUMMARY_TASK: task.id}
        if self.epoch is not None:
            summary[SUMMARY_EPOCH] = str(self.epoch)
        start, end = task.interval
        files = [(s.path, s.size, start, end) for s in act.segments]
        try:
            replace(
                self.lake,
                self.session,
                published(task.dataSource, files, summary),
                {r.path for r in rows},
            )
        except Replaced as exc:
            return _failed(str(exc))
        now = self.clock()
        self.session.add_all(_segment_row(s, rows, now) for s in act.segments)
        states.forget([r.id for r in rows])
        row.report = {
            "status": "RUNNING",
            "segments": [s.id for s in act.segments],
            "replaced": task.inputs,
        }
        self.session.flush()
        log.info(
            "%s: %s compacted, %d files into %d (%s)",
            task.dataSource,
            task.interval,
            len(rows),
            len(act.segments),
            task.id,
        )
        return PublishResult(PublishOutcome.PUBLISHED)


def _failed(reason: str) -> PublishResult:
    return PublishResult(PublishOutcome.FAILED, reason)


def _segment_row(segment: Any, replaced: list[SegmentRow], now: datetime) -> SegmentRow:
    return SegmentRow(
        id=segment.id,
        datasource=segment.dataSource,
        interval_start=replaced[0].interval_start,
        interval_end=replaced[0].interval_end,
        version=segment.version,
        partition_num=segment.partitionNum,
        path=segment.path,
        size_bytes=segment.size,
        num_rows=segment.numRows,
        used=True,
        payload=union_payload(replaced),
        created_at=now,
    )


def union_payload(rows: list[SegmentRow]) -> dict[str, Any]:
    """The replaced segments' payload, their dimensions and metrics all named (in order)."""
    payload = dict(rows[0].payload or {})
    for key in ("dimensions", "metrics"):
        names: list[str] = []
        for row in rows:
            names += [n for n in (row.payload or {}).get(key, []) if n not in names]
        payload[key] = names
    return payload
