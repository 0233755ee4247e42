"""What a task reports of itself, kept by its indexer and read by its control API and its
final report, and the error a control call that cannot be honoured raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tasks.partitions import Offsets, offsets_json
from tasks.protocol import TaskCounters, TaskMetrics, TaskReport, TaskState
from tasks.rows.pipeline import RowStats


class ControlError(Exception):
    """A control request that cannot be honoured now; carries the HTTP status to answer."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


@dataclass
class IndexerState:
    """Everything the control API reports; changed only under the indexer's lock."""

    status: TaskState = TaskState.NOT_STARTED
    current: Offsets = field(default_factory=dict)
    end: Offsets = field(default_factory=dict)
    stats: RowStats = field(default_factory=RowStats)
    samples: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    segments: list[str] = field(default_factory=list)
    end_is_final: bool = False
    started_at: float | None = None
    first_read_at: float | None = None  # wall time the first batch with records began reading
    first_persist_at: float | None = None  # ... and when that batch was persisted
    paused_at: float | None = None  # wall time the task last stopped reading for a pause
    counters: dict[str, float] = field(default_factory=dict)  # see task_counters()

    def task_counters(self) -> TaskCounters:
        counted = {
            name: round(self.counters.get(name, 0), 3)
            if name.endswith("Seconds")
            else int(self.counters.get(name, 0))
            for name in TaskCounters.model_fields
        }
        return TaskCounters.model_validate(counted)

    def metrics(self) -> TaskMetrics:
        """What GET /metrics answers."""
        return TaskMetrics(
            **self.task_counters().model_dump(),
            rowStats=self.stats.as_dict(),
            currentOffsets=offsets_json(self.current),
        )

    def report(self) -> TaskReport:
        """What the task leaves in report.json."""
        return TaskReport(
            status=self.status,
            errorMsg=self.error,
            rowStats=self.stats.as_dict(),
            counters=self.task_counters(),
            unparseableEvents=self.samples,
            segments=self.segments,
            currentOffsets=offsets_json(self.current),
            endOffsets=offsets_json(self.end),
            skippedOffsets=self.skipped,
            readingSince=_iso(self.started_at),
            firstReadAt=_iso(self.first_read_at),
            firstPersistAt=_iso(self.first_persist_at),
            pausedAt=_iso(self.paused_at),
        )


def _iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")
