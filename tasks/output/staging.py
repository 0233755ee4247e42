"""Segments written while a sequence is still read, so that its handoff does not wait on a merge
of everything it read (tasks/runtime/sequences.py).

A sequence's persists written by the Python workers (split by segment interval) are taken in
groups of at least `stage_rows` records: once the persists not yet staged hold that many, one
background thread of the task merges them, interval by interval, into chunks in the segment's
final form (rolled up, sorted, zstd, at most maxRowsPerSegment rows) under the task's own
`_tasks/<id>/staged/` in deep storage, which the leader sweeps if the task never publishes. At
the handoff only the persists not staged are merged; the staged chunks are moved into the
segment's directory and numbered after the merged ones. The handoff then costs at most a group
of persists, not the sequence.

Rows of one interval in different chunks are not rolled up together: as in Druid's streaming
ingestion, rollup across a task's segments is best-effort (compaction rolls them up later).
The persists stay until the publish, for queries of the rows tasks hold. A staged chunk's
footer names its datasource, topic, task and spec version; its segment id and offsets are not
known when it is written.

`stage_rows` is the task context's `stageRows` (tasks/support.py: default 200000; 0 never
stages; anything else is refused when the spec or task is submitted). Plans that
discover dimensions are not staged (a later persist may add a column).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from tasks import granularity
from tasks.output.interval_merge import INTERVAL, merge_columns, merged_interval
from tasks.output.segments import SegmentContext, descriptors, interval_files
from tasks.protocol import SegmentDescriptor
from tasks.rows.pipeline import RowPlan
from tasks.storage import Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedChunk:
    interval_start: int
    path: str  # in deep storage's file system
    rows: int


@dataclass
class _Sequence:
    waiting: list[tuple[str, int]] = field(default_factory=list)  # (persist, records)
    staged: list[StagedChunk] = field(default_factory=list)
    persists: set[str] = field(default_factory=set)  # the persists the chunks hold
    jobs: list[Future[None]] = field(default_factory=list)


class Stager:
    """A task's background merges of its sequences' persists into segment chunks."""

    def __init__(
        self,
        plan: RowPlan,
        storage: Storage,
        root: str,
        provenance: dict[str, str],
        rows: int,
        max_rows: int,
        scope: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        self.plan = plan
        self.storage = storage
        self.root = root  # where staged chunks are written
        self.provenance = provenance
        self.rows = rows
        self.max_rows = max_rows
        self.scope = scope
        self.dims = [name for name, _ in plan.declared_dimensions()]
        self.enabled = rows > 0 and not plan.discovers() and bool(self.dims)
        self.sequences: dict[int, _Sequence] = {}
        self.lock = threading.Lock()
        self.pool: ThreadPoolExecutor | None = None

    def add(self, sequence: int, persist: str, records: int) -> None:
        """A persist the Python workers wrote for `sequence`: staged with those before it once
        they hold `rows` records."""
        if not self.enabled:
            return
        with self.lock:
            state = self.sequences.setdefault(sequence, _Sequence())
            state.waiting.append((persist, records))
            if sum(n for _, n in state.waiting) < self.rows:
                return
            group, state.waiting = [p for p, _ in state.waiting], []
            if self.pool is None:
                self.pool = ThreadPoolExecutor(1, thread_name_prefix="stager")
            state.jobs.append(self.pool.submit(self._stage, sequence, group))

    def take(self, sequence: int) -> tuple[list[StagedChunk], set[str]]:
        """Wait for the sequence's stagings; its staged chunks and the persists they hold (an
        error in a staging is raised here)."""
        with self.lock:
            jobs = list(self.sequences.get(sequence, _Sequence()).jobs)
        for job in jobs:  # (no more come: the sequence is closed)
            job.result()
        with self.lock:
            state = self.sequences.pop(sequence, _Sequence())
        return state.staged, state.persists

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _stage(self, sequence: int, persists: list[str]) -> None:
        import pyarrow.parquet as pq

        names, combine = merge_columns(self.plan, self.dims)
        footer = {k.encode(): v.encode() for k, v in self.provenance.items()}
        chunks = []
        fs = self.storage.filesystem()
        directory = f"{self.root}/{sequence:04d}"
        with self.lock:
            number = len(self.sequences.get(sequence, _Sequence()).staged)
        with self.scope():
            self.storage.make_dirs(directory)
            for start, files in sorted(interval_files(persists, self.storage).items()):
                table = merged_interval(start, files, names, self.dims, combine, self.storage)
                table = table.drop_columns([INTERVAL])
                table = table.replace_schema_metadata({**(table.schema.metadata or {}), **footer})
                for begin in range(0, table.num_rows, self.max_rows):
                    part = table.slice(begin, self.max_rows)
                    path = f"{directory}/{start}-{number}.parquet"
                    pq.write_table(part, path, compression="zstd", filesystem=fs)
                    chunks.append(StagedChunk(start, path, part.num_rows))
                    number += 1
        with self.lock:
            state = self.sequences.setdefault(sequence, _Sequence())
            state.staged += chunks
            state.persists.update(persists)
        log.info(
            "sequence %s: %d persists staged as %d chunks", sequence, len(persists), len(chunks)
        )


def place(
    staged: list[StagedChunk],
    merged: list[SegmentDescriptor],
    context: SegmentContext,
    plan: RowPlan,
    dims: list[str],
) -> list[SegmentDescriptor]:
    """The staged chunks moved into their segments' directories, numbered in each interval
    after the merged segments; their descriptors."""
    storage = context.storage
    fs = storage.filesystem()
    taken: dict[str, int] = {}  # interval start (ISO) -> the next free chunk number
    for segment in merged:
        start_iso = segment.intervalStart
        taken[start_iso] = max(taken.get(start_iso, 0), segment.partitionNum + 1)
    written = []
    for chunk in staged:
        start = chunk.interval_start
        end = granularity.bucket_end(start, plan.segment_granularity)
        number = taken.get(granularity.iso(start), 0)
        taken[granularity.iso(start)] = number + 1
        directory = context.directory(start, end)
        storage.make_dirs(directory)
        path = f"{directory}/{number}.parquet"
        fs.move(chunk.path, path)
        written.append(
            {
                "interval_start": start,
                "interval_end": end,
                "chunk": number,
                "path": storage.uri(path),
                "rows": chunk.rows,
                "size": storage.size(path),
            }
        )
    placed = descriptors(written, context, dims, plan.metric_names)
    return sorted([*merged, *placed], key=lambda s: s.id)
