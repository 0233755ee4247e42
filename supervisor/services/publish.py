"""The publish transaction: segments and offsets committed together, exactly once.

In one DB transaction: the committed offsets of the task's partitions must equal its start
offsets (compare-and-swap on the row's version), then the segments are inserted and the end
offsets written. A replica that finds its end offsets and segments already committed has lost
the race to a sibling: success, nothing written. A start ahead of what is committed means the
predecessor is still publishing: retry; so does a start on partitions with nothing committed
yet while a running task of the supervisor starts before it (an earlier generation that has
not published). Anything else fails with the reason.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import SegmentRow
from supervisor.db.offsets import OffsetsRepository
from supervisor.db.repositories import SegmentRepository
from supervisor.db.tasks import TaskRepository
from supervisor.errors import NotLeading
from supervisor.lake.tables import (
    ADOPTION,
    SUMMARY_COMMITTED,
    SUMMARY_END,
    SUMMARY_EPOCH,
    SUMMARY_OPERATION,
    SUMMARY_START,
    SUMMARY_STREAM,
    SUMMARY_SUPERVISOR,
    SUMMARY_TASK,
    Lake,
    LakeConflict,
    Published,
    published,
)
from tasks.partitions import offsets_json
from tasks.protocol import PublishAction, PublishOutcome, PublishResult, SegmentDescriptor

log = logging.getLogger(__name__)


def _segment_row(segment: SegmentDescriptor, task_id: str, now: datetime) -> SegmentRow:
    return SegmentRow(
        id=segment.id,
        datasource=segment.dataSource,
        interval_start=datetime.fromisoformat(segment.intervalStart),
        interval_end=datetime.fromisoformat(segment.intervalEnd),
        version=segment.version,
        partition_num=segment.partitionNum,
        path=segment.path,
        size_bytes=segment.size,
        num_rows=segment.numRows,
        used=True,
        payload={**segment.model_dump(mode="json"), "taskId": task_id},
        created_at=now,
    )


def _file(row: SegmentRow) -> tuple[str, int, str, str]:
    """A published segment as the table takes it: path, size, interval."""
    return (
        row.path,
        row.size_bytes,
        row.interval_start.isoformat(),
        row.interval_end.isoformat(),
    )


def adopt_published(sessions: Callable[[], Session], lake: Lake) -> list[str]:
    """Give every datasource a release before Iceberg published (used segments, no table) its
    table, holding those segments (a snapshot of its own per datasource); the datasources it
    adopted. A datasource whose files cannot be read stays as it is and is named in the log:
    its next publish tries again."""
    done = []
    with sessions() as session:
        waiting = [
            d for d in SegmentRepository(session).datasources() if not lake.exists(session, d)
        ]
    for datasource in waiting:
        with sessions() as session:
            used = SegmentRepository(session).used(datasource)
            summary = {SUMMARY_OPERATION: ADOPTION}
            try:
                files = [_file(r) for r in used]
                lake.append(session, published(datasource, [], summary, files))
                session.commit()
            except (OSError, ValueError, LakeConflict) as exc:
                session.rollback()
                log.error("datasource %s keeps its segments without a table: %s", datasource, exc)
                continue
        done.append(datasource)
        log.info(
            "datasource %s: %d published segments adopted into its table", datasource, len(used)
        )
    return done


def _compare(
    stored: dict[str, int], start: dict[str, int], end: dict[str, int]
) -> PublishOutcome | None:
    """None when the start matches what is stored; else why not. Stored offsets at or past
    the end on every partition may be a replica's publish of this range, which its successors'
    may have followed before this one's came (its overlord was down meanwhile): the caller
    tells by the segments."""
    overlapping = [p for p in start if p in stored]
    if all(stored[p] == start[p] for p in overlapping):
        return None
    if all(stored[p] >= end[p] for p in overlapping) and len(overlapping) == len(start):
        return PublishOutcome.ALREADY_PUBLISHED
    if all(stored[p] <= start[p] for p in overlapping):
        return PublishOutcome.RETRY
    return PublishOutcome.FAILED


class PublishService:
    def __init__(
        self, session: Session, clock: Clock, epoch: int | None = None, lake: Lake | None = None
    ) -> None:
        self.session = session
        self.clock = clock
        self.epoch = epoch  # the leader epoch this overlord publishes under (None: no lease)
        self.lake = lake  # the datasources' Iceberg tables (None: segments rows alone)
        self.offsets = OffsetsRepository(session)
        self.segments = SegmentRepository(session)

    def publish(self, task_id: str, action: PublishAction) -> PublishResult:
        """Run the transaction; the caller's session is committed here or rolled back."""
        try:
            result = self._transaction(task_id, action)
        except IntegrityError:
            self.session.rollback()
            return PublishResult(
                PublishOutcome.RETRY, "another publish of these offsets raced this one"
            )
        except NotLeading as exc:
            self.session.rollback()
            log.warning("publish by task %s refused: %s", task_id, exc)
            return PublishResult(PublishOutcome.RETRY, str(exc))
        if result.outcome is PublishOutcome.PUBLISHED:
            self.session.commit()
        else:
            self.session.rollback()
        log.info("publish by task %s: %s %s", task_id, result.outcome, result.reason)
        return result

    def _transaction(self, task_id: str, action: PublishAction) -> PublishResult:
        start = offsets_json(action.startMetadata.offsets())
        end = offsets_json(action.endMetadata.offsets())
        stream = action.startMetadata.stream
        if action.endMetadata.stream != stream or set(start) != set(end):
            return PublishResult(
                PublishOutcome.FAILED, "start and end metadata name different partitions"
            )
        now = self.clock()
        if self.epoch is not None:  # fenced: this overlord still leads, in this transaction
            LeaseRepository(self.session).require(self.epoch)
        row = self.offsets.get(action.supervisorId)
        stored: dict[str, int] = dict(row.offsets) if row is not None else {}
        if row is not None and row.stream != stream:
            return PublishResult(
                PublishOutcome.FAILED,
                f"committed offsets are for stream '{row.stream}', not '{stream}'",
            )
        verdict = _compare(stored, start, end)
        ids = [segment.id for segment in action.segments]
        if verdict is PublishOutcome.ALREADY_PUBLISHED:
            already = self._already(action)
            if already is not None:
                return already
            verdict = PublishOutcome.FAILED
        if verdict is PublishOutcome.RETRY:
            return PublishResult(
                PublishOutcome.RETRY,
                f"start offsets {start} are ahead of the committed offsets {stored}; "
                "the previous task is still publishing",
            )
        if verdict is PublishOutcome.FAILED:
            return PublishResult(
                PublishOutcome.FAILED,
                f"inconsistency between the committed offsets {stored} and the task's "
                f"start offsets {start}",
            )
        fresh = {p: offset for p, offset in start.items() if p not in stored}
        behind = fresh and TaskRepository(self.session).running_behind(
            action.supervisorId, task_id, fresh
        )
        if behind:
            # Nothing committed for these partitions yet, so any start would match: an earlier
            # generation still running must publish first (its range comes before this one).
            return PublishResult(
                PublishOutcome.RETRY,
                f"task {behind.id} starts before {fresh} and has not published yet; "
                "the previous task is still publishing",
            )
        if self.segments.existing_ids(ids):
            # Segments and offsets commit together, so this is a concurrent publish that committed
            # after the offsets were read: the retry will see it.
            return PublishResult(PublishOutcome.RETRY, "these segments were published concurrently")
        return self._write(task_id, action, row, {**stored, **end}, now)

    def _already(self, action: PublishAction) -> PublishResult | None:
        """The range is committed: by whom (None: not with this task's segments)."""
        ids = [segment.id for segment in action.segments]
        paths = self.segments.paths(ids)
        if len(paths) < len(ids):  # a compaction may have replaced them since
            replaced = TaskRepository(self.session).compacted_away(action.dataSource)
            paths |= {i: replaced[i] for i in ids if i in replaced}
        if set(paths) != set(ids):
            return None
        if all(paths[s.id] == s.path for s in action.segments):
            # this task's own publish, committed by an attempt whose answer was lost (its
            # overlord died): the task must keep its files, they are (or were) the segments
            return PublishResult(
                PublishOutcome.PUBLISHED, "committed by an earlier attempt of this task"
            )
        return PublishResult(PublishOutcome.ALREADY_PUBLISHED, "a replica published this range")

    def _write(
        self,
        task_id: str,
        action: PublishAction,
        row: Any,
        new_offsets: dict[str, int],
        now: datetime,
    ) -> PublishResult:
        """The writes of a publish that may go ahead: the offsets (compare-and-swap on the
        row read), the segment rows, the table's snapshot. The snapshot is staged before
        anything is written (the writes take the rows' locks, and on SQLite the one writer
        lock): only its swap comes last."""
        stream = action.startMetadata.stream
        snapshot = self._snapshot(task_id, action, new_offsets)
        staged = self.lake.stage(self.session, snapshot) if self.lake and snapshot else None
        try:
            if row is None:
                self.offsets.insert(
                    action.supervisorId, action.dataSource, stream, new_offsets, now
                )
            elif not self.offsets.compare_and_swap(
                action.supervisorId, row.version, new_offsets, now
            ):
                return PublishResult(
                    PublishOutcome.RETRY, "the committed offsets changed during the publish"
                )
            self.segments.insert([_segment_row(s, task_id, now) for s in action.segments])
            if self.lake is not None and snapshot is not None:
                pending, staged = staged, None
                self.lake.commit(self.session, snapshot, pending)
        except LakeConflict as exc:
            return PublishResult(PublishOutcome.RETRY, str(exc))
        finally:
            if self.lake is not None:
                self.lake.discard(staged)  # (a publish that did not get that far)
        return PublishResult(PublishOutcome.PUBLISHED)

    def _snapshot(
        self, task_id: str, action: PublishAction, committed: dict[str, int]
    ) -> Published | None:
        """The segments as one snapshot of the datasource's Iceberg table; its summary says
        whose range it holds (the table describes itself: its offsets can be audited, or a
        supervisor's state rebuilt, from it alone). A publish with no segments is an empty
        snapshot once the table exists, so the latest snapshot's offsets stay the
        supervisor's. None: no tables here, or nothing to make one of."""
        if self.lake is None:
            return None
        segments = [(s.path, s.size, s.intervalStart, s.intervalEnd) for s in action.segments]
        adopted: list[tuple[str, int, str, str]] = []
        if not self.lake.exists(self.session, action.dataSource):
            # should this publish make the table, its first snapshot holds every used segment
            # of the datasource: those a release before Iceberg published, and this one's
            adopted = [_file(row) for row in self.segments.used(action.dataSource)]
            if not adopted and not segments:
                return None
        summary = {
            SUMMARY_SUPERVISOR: action.supervisorId,
            SUMMARY_TASK: task_id,
            SUMMARY_EPOCH: "" if self.epoch is None else str(self.epoch),
            SUMMARY_STREAM: action.startMetadata.stream,
            SUMMARY_START: json.dumps(offsets_json(action.startMetadata.offsets())),
            SUMMARY_END: json.dumps(offsets_json(action.endMetadata.offsets())),
            SUMMARY_COMMITTED: json.dumps(committed, sort_keys=True),
        }
        return published(action.dataSource, segments, summary, adopted)
