"""The interface both batch engines implement: read a batch's range, persist it, merge a
sequence's persists into segments."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Protocol

from tasks.output.segments import SegmentContext
from tasks.protocol import SegmentDescriptor
from tasks.reading.reader import KafkaBatch
from tasks.rows.pipeline import BatchResult


class EngineName(StrEnum):
    PYTHON_WORKERS = "pythonWorkers"
    SPARK_SQL = "sparkSql"


class FallBack(Exception):
    """The engine cannot give this batch what the Spark SQL engine would; the message says
    why, and the batch goes to the Spark SQL engine."""


class BatchEngine(Protocol):
    name: EngineName

    def read(self, batch: KafkaBatch) -> Any:
        """The batch's records as this engine takes them (lazily: nothing is read yet)."""
        ...

    def persist(
        self, records: Any, persist_path: str, max_samples: int, known: list[tuple[str, str]]
    ) -> BatchResult:
        """Parse, filter, roll up and write the records to `persist_path`: counts, samples (at
        most `max_samples`) and the dimensions seen (`known`: those seen before)."""
        ...

    def merge(
        self, persists: list[str], dims: list[str], context: SegmentContext, max_rows: int
    ) -> list[SegmentDescriptor]:
        """A sequence's persists into segments of at most `max_rows` rows."""
        ...
