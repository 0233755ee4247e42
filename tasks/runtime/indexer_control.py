"""What a Kafka indexing task's control API asks of its indexer (tasks/runtime/indexer.py),
from the control server's threads: pause, resume, end offsets, checkpoints, stop, a kill, and
what it reports. Everything here holds the indexer's lock; the reading loop applies the
requests between batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.partitions import Offsets, offsets_json, sorted_keys
from tasks.protocol import TaskState
from tasks.runtime.held import Gone, files_of, held_since, one_of
from tasks.runtime.indexer_state import ControlError, IndexerState
from tasks.runtime.rates import MovingRates
from tasks.runtime.sequences import Sequence
from tasks.storage import LOCAL, Storage


class IndexerControls:
    """The indexer's controls; its state is the indexer's (KafkaIndexer sets every field)."""

    lock: threading.Condition
    state: IndexerState
    sequences: list[Sequence]
    rates: MovingRates
    clock: Callable[[], float]
    on_last_stretch: Callable[[], None]
    pause_requested: bool
    stop_requested: bool
    last_stretch: bool  # on_last_stretch has run (under the lock)
    aborted: str | None  # killed: why; nothing more is read or published
    in_flight: Offsets | None  # the end of the batch being read, if one is
    storage: Storage  # deep storage
    shared_persists: bool  # persists in deep storage (else in the work directory)

    def snapshot(self) -> IndexerState:
        with self.lock:
            return IndexerState(
                **{
                    **vars(self.state),
                    "current": dict(self.state.current),
                    "end": dict(self.state.end),
                    "samples": list(self.state.samples),
                    "counters": dict(self.state.counters),
                }
            )

    def pause(self, timeout: float) -> Offsets | None:
        """Ask the loop to pause; the offsets it stops at once paused, None if not yet. With a
        batch in flight, at once: the batch's end, where the loop stops after it (it starts
        no other while the pause holds), so the caller does not wait for the batch (at a
        hundred tasks of a shared application a batch took ~3 s, and every checkpoint with it)."""
        with self.lock:
            if self.state.status not in (TaskState.READING, TaskState.PAUSED):
                raise ControlError(
                    409,
                    f"Can't pause, task is not in a pausable state (state: [{self.state.status}])",
                )
            self.pause_requested = True
            self.lock.notify_all()
            if self.in_flight is not None:
                return self._stops_at()
            self.lock.wait_for(lambda: self.state.status is not TaskState.READING, timeout)
            if self.state.status is TaskState.PAUSED:
                return dict(self.state.current)
            return None

    def resume(self, timeout: float = 5.0) -> None:
        with self.lock:
            self.pause_requested = False
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.state.status is not TaskState.PAUSED, timeout)
            if self.state.status is TaskState.PAUSED:
                raise ControlError(500, "the task did not resume in time")

    def set_end_offsets(self, offsets: Offsets, finish: bool) -> Offsets:
        """Druid's POST offsets/end, only while paused, each offset >= current; resumes.
        finish=true sets the final end; finish=false closes the current sequence there."""
        with self.lock:
            if finish and self.state.end_is_final and offsets == self.state.end:
                return dict(self.state.end)  # a repeat of the same request
            if not finish and any(s.end == offsets for s in self.sequences):
                return dict(offsets)
            # A pause asked for holds the loop where _stops_at says: in its batch in flight, or
            # between that batch's landing and its sitting PAUSED (it starts no other batch).
            if self.state.status is not TaskState.PAUSED and not self.pause_requested:
                raise ControlError(400, "Task must be paused before changing the end offsets")
            stops_at = self._stops_at()
            if set(offsets) != set(stops_at):
                raise ControlError(
                    400,
                    f"end offsets must name partitions {sorted_keys(stops_at)}, "
                    f"got {sorted_keys(offsets)}",
                )
            for partition, offset in offsets.items():
                current = stops_at[partition]
                if offset < current:
                    raise ControlError(
                        400,
                        f"partition {partition}: end offset {offset} is before the current "
                        f"offset {current}",
                    )
            if finish:
                self.state.end = dict(offsets)
                self.state.end_is_final = True
            self.sequences[-1].end = dict(offsets)
            self.pause_requested = False
            self.lock.notify_all()
        if finish:
            self._last_stretch()
        return dict(offsets)

    def _stops_at(self) -> Offsets:
        """Under the lock: where the loop stops for a pause, the batch in flight read."""
        return {**self.state.current, **(self.in_flight or {})}

    def _last_stretch(self) -> None:
        with self.lock:
            if self.last_stretch:
                return
            self.last_stretch = True
        self.on_last_stretch()

    def row_stats(self) -> dict[str, Any]:
        """Druid's rowStats: the row counts' moving averages (rates a second over the last 1,
        5 and 15 minutes) and totals."""
        with self.lock:
            return {
                "movingAverages": {"buildSegments": self.rates.averages(self.clock())},
                "totals": {"buildSegments": self.state.stats.as_dict()},
            }

    def checkpoints(self) -> dict[str, dict[str, int]]:
        """Each sequence's start, the next one's included as soon as a checkpoint set its
        offsets (as Druid answers), not only once the read loop has opened it."""
        with self.lock:
            starts = {str(s.index): offsets_json(s.start) for s in self.sequences}
            last = self.sequences[-1]
            final = self.state.end_is_final and last.end == self.state.end
            if last.end is not None and not final:
                starts[str(last.index + 1)] = offsets_json(last.end)
            return starts

    def held(self, since: Offsets) -> dict[str, object]:
        """The files of the rows held past the committed offsets `since`, and the offsets they
        cover (tasks/runtime/held.py); `Gone` if a publish has moved past `since`."""
        with self.lock:
            found = held_since(self.sequences, self.state.current, since)
        storage = self.storage if self.shared_persists else LOCAL
        files = files_of(found.persists, storage.files)
        return found.as_json(files, "deep" if self.shared_persists else "local")

    def held_file(self, path: str) -> bytes:
        """A file of the rows held, by the path `held` gave, as an Arrow IPC stream (for an
        overlord that cannot read this host's work directory); `Gone` if it is not one now."""
        with self.lock:
            persists = [persist for sequence in self.sequences for persist in sequence.persists]
        storage = self.storage if self.shared_persists else LOCAL
        try:
            table = pq.read_table(one_of(persists, path), filesystem=storage.filesystem())
        except FileNotFoundError:
            raise Gone(f"{path.rsplit('/', 1)[-1]} is gone: its rows are published") from None
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        return bytes(sink.getvalue())

    def stop(self) -> None:
        """Graceful stop: finish the batch in flight, then publish what was read and exit."""
        with self.lock:
            self.stop_requested = True
            self.pause_requested = False
            self.lock.notify_all()

    def abort(self, reason: str) -> None:
        """A kill: leave the loop at once and fail, publishing nothing more (the caller
        also refuses the publisher's calls and cancels the task's Spark jobs)."""
        with self.lock:
            self.aborted = reason
            self.lock.notify_all()

    # ---- state changes, under the lock (the loop's as well) ---------------------------------

    def _count(self, name: str, amount: float) -> None:
        """Under the lock: add to a task counter."""
        self.state.counters[name] = self.state.counters.get(name, 0) + amount

    def _count_handoff(self, seconds: float) -> None:
        with self.lock:
            self._count("handoffs", 1)
            self._count("handoffSeconds", seconds)

    def _fail(self, reason: str) -> None:
        with self.lock:
            self.state.error = reason
            self.state.status = TaskState.FAILED
            self.lock.notify_all()

    def _set_status(self, status: TaskState) -> None:
        with self.lock:
            self.state.status = status
            self.lock.notify_all()

    def _honour_pause(self) -> None:
        """Under the lock: sit PAUSED while a pause is asked for (and no stop)."""
        paused_at = self.clock()
        while self.pause_requested and not self.stop_requested and self.aborted is None:
            if self.state.status is not TaskState.PAUSED:
                self.state.status = TaskState.PAUSED
                self.state.paused_at = time.time()
                self.lock.notify_all()
            self.lock.wait(0.5)
        if self.state.status is TaskState.PAUSED:
            self._count("pauseSeconds", self.clock() - paused_at)
            self.state.status = TaskState.READING
            self.lock.notify_all()
