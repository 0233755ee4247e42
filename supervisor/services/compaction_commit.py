"""A compact task's commit (its ReplaceAction, on the overlord's task action endpoint): the
files it wrote replace the segments it read, in one transaction that checks the leader's
epoch, or nothing is committed.

In that transaction: the segments it was given must still be used and their files still in
the table (lake/rewrite.py `replace` gives up, Replaced, if one left it; a streaming publish
that appended to the same interval meanwhile is kept), its files must hold exactly the rows
they replace (and be of the task's interval, which holds the segments it read: theirs, or a
coarser granularity's bucket of them), then one overwrite snapshot (deleting exactly the
files read, adding the new), the new segment rows, the old rows deleted, and the task's report
naming what it replaced (supervisor/services/publish.py tells a late replica of a replaced
segment that its range was published). A task whose commit fails deletes what it wrote."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import SegmentRow, TaskRow
from supervisor.db.repositories import SegmentRepository
from supervisor.db.retention import SegmentStates
from supervisor.lake.rewrite import Replaced, replace
from supervisor.lake.tables import SUMMARY_EPOCH, SUMMARY_OPERATION, SUMMARY_TASK, Lake, published
from tasks.protocol import (
    CompactTask,
    PublishOutcome,
    PublishResult,
    ReplaceAction,
    TaskStatusCode,
)

log = logging.getLogger(__name__)


class CompactionCommit:
    def __init__(self, session: Session, lake: Lake, clock: Clock, epoch: int | None) -> None:
        self.session = session
        self.lake = lake
        self.clock = clock
        self.epoch = epoch

    def commit(self, row: TaskRow, act: ReplaceAction) -> PublishResult:
        """The task's files in place of what it read (PUBLISHED), or why not (FAILED); not
        committed here (the route's session is). NotLeading: this overlord no longer leads.
        A commit asked again after its answer was lost, even one that raced its first attempt
        (the first committed while this one waited), is PUBLISHED: the task keeps its files."""
        if self._committed(row, act):
            return PublishResult(PublishOutcome.PUBLISHED, "committed by an earlier attempt")
        if row.status != TaskStatusCode.RUNNING:
            return _failed(f"task is {row.status}")
        result = self._replace(row, CompactTask.model_validate(row.payload), act)
        if result.outcome is PublishOutcome.FAILED and self._committed(row, act):
            return PublishResult(PublishOutcome.PUBLISHED, "committed by an earlier attempt")
        return result

    def _committed(self, row: TaskRow, act: ReplaceAction) -> bool:
        """Whether this task's segments, these very files, are committed (its report says so
        once they are; their rows, while a later compaction has not replaced them)."""
        ids = [s.id for s in act.segments]
        if not ids:
            return False
        if (row.report or {}).get("segments") == ids and (row.report or {}).get("paths") == [
            s.path for s in act.segments
        ]:
            return True
        paths = SegmentRepository(self.session).paths(ids)
        return len(paths) == len(ids) and all(paths[s.id] == s.path for s in act.segments)

    def _replace(self, row: TaskRow, task: CompactTask, act: ReplaceAction) -> PublishResult:
        if act.replaced != task.inputs:
            return _failed("it replaces other segments than the task was given")
        if any(s.dataSource != task.dataSource for s in act.segments):
            return _failed("its segments belong to another datasource")
        if any((s.intervalStart, s.intervalEnd) != tuple(task.interval) for s in act.segments):
            return _failed("its segments are of another interval than the task's")
        paths = [s.path for s in act.segments]
        where = f"/{task.version}/{task.id}/"
        if len(set(paths)) != len(paths) or any(where not in path for path in paths):
            return _failed(f"its files are not new files of this task (under {where})")
        if self.epoch is not None:
            LeaseRepository(self.session).require(self.epoch)
        states = SegmentStates(self.session)
        # the inputs' rows locked first, then the table (in `replace`): the order a mark of
        # segments unused takes, so neither waits on the other for good
        rows = states.of(task.dataSource, True, ids=list(task.inputs), lock=True)
        if len(rows) != len(task.inputs) or any(r.path != task.inputs[r.id] for r in rows):
            return _failed("segments it read were dropped or replaced meanwhile")
        start, end = (datetime.fromisoformat(moment) for moment in task.interval)
        if any(r.interval_start < start or r.interval_end > end for r in rows):
            return _failed("segments it read are not within its interval")
        summary = {SUMMARY_OPERATION: "compact", SUMMARY_TASK: task.id}
        if self.epoch is not None:
            summary[SUMMARY_EPOCH] = str(self.epoch)
        files = [(s.path, s.size, *task.interval) for s in act.segments]
        new = published(task.dataSource, files, summary)
        footers = self.lake.footers(new)  # the rows as the files hold them, not as said
        counted = {path: footer.num_rows for path, (_, _, footer) in footers.items()}
        read, written = sum(r.num_rows for r in rows), sum(counted.values())
        if read != written:
            return _failed(f"its files hold {written} rows, not the {read} they replace")
        try:
            replace(self.lake, self.session, new, {r.path for r in rows}, footers)
        except Replaced as exc:
            return _failed(str(exc))
        now = self.clock()
        self.session.add_all(
            _segment_row(s, counted[s.path], rows, (start, end), now) for s in act.segments
        )
        states.forget([r.id for r in rows])
        row.report = {
            "status": "SUCCESS",
            "segments": [s.id for s in act.segments],
            "paths": paths,
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


def _segment_row(
    segment: Any,
    num_rows: int,
    replaced: list[SegmentRow],
    interval: tuple[datetime, datetime],
    now: datetime,
) -> SegmentRow:
    return SegmentRow(
        id=segment.id,
        datasource=segment.dataSource,
        interval_start=interval[0],
        interval_end=interval[1],
        version=segment.version,
        partition_num=segment.partitionNum,
        path=segment.path,
        size_bytes=segment.size,
        num_rows=num_rows,
        used=True,
        # the segment as the task wrote it, naming every dimension and metric it replaced
        payload={**segment.model_dump(mode="json"), **_names(union_payload(replaced))},
        created_at=now,
    )


def _names(payload: dict[str, Any]) -> dict[str, Any]:
    return {key: payload[key] for key in ("dimensions", "metrics") if key in payload}


def union_payload(rows: list[SegmentRow]) -> dict[str, Any]:
    """The replaced segments' payload, their dimensions and metrics all named (in order)."""
    payload = dict(rows[0].payload or {})
    for key in ("dimensions", "metrics"):
        names: list[str] = []
        for row in rows:
            names += [n for n in (row.payload or {}).get(key, []) if n not in names]
        payload[key] = names
    return payload
