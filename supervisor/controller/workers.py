"""Workers: the threads that take keys from a WorkQueue and reconcile them.

`count` passes run at once: a pass mostly computes and talks to the DB, so more threads only
slice the one GIL finer (bench/control_plane.py, 1,000 supervisors: pass p99 during a rollover
wave 40 ms with 2 workers, 82 with 4, 146 with 8, and the wave no faster). A pass stuck waiting
(a task or broker slow to answer) must not hold up the others, though: a pass running longer
than `stall_s` stops counting, and a thread is added in its place (up to `max_threads` in
all); once the stalled passes end, the surplus threads leave. A pass about to wait on a task
(a pause, which lasts until the task's batch in flight ends) says so with `waits()`: it counts
as stalled at once and the watcher adds its thread now. At a hundred quiet tasks asking for a
checkpoint every 5 s, passes that waited ~1.5 s each but became stalled only after `stall_s`
left the checkpoints of a 5 s handoff period ~20 s apart (bench/density.py).

The threads share no lock of their own: the queue's is the only one. Only the watcher thread
adds threads; a worker leaves between passes when more threads run than the unstalled count
needs (two leaving at once leave one too few, which the watcher restores within `stall_s/4`).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Hashable
from functools import partial
from typing import Generic, TypeVar

from supervisor.controller.workqueue import WorkQueue

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
_passing = threading.local()  # on a worker thread, during a pass: `mark`, its waits()


def waits() -> None:
    """The pass on this thread is about to wait on something else: a thread takes its place
    now. Outside a worker's pass (a test's direct call) it does nothing."""
    mark = getattr(_passing, "mark", None)
    if mark is not None:
        mark()


class Workers(Generic[K]):
    def __init__(
        self,
        queue: WorkQueue[K],
        work: Callable[[K], None],
        count: int,
        max_threads: int = 64,
        stall_s: float = 1.0,
        name: str = "supervisor-pass",
    ) -> None:
        self.queue = queue
        self.work = work
        self.count = count
        self.max_threads = max(count, max_threads)
        self.stall_s = stall_s
        self.name = name
        self._threads: list[threading.Thread] = []  # appended to by the watcher alone
        self._numbers = itertools.count()
        self._stopping = threading.Event()
        self._wake = threading.Event()  # a pass waits(): the watcher looks now
        self._watcher = threading.Thread(target=self._watch, name=f"{name}-watch", daemon=True)

    def start(self, watch: bool = True) -> None:
        """`count` worker threads, and the watcher that adds threads for stalled passes (its
        runs are the caller's, `watch_once`, without it: a test's, on a clock of its own)."""
        for _ in range(self.count):
            self._add_thread()
        if watch:
            self._watcher.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """No more passes; waits up to `timeout_s` for the running ones."""
        self._stopping.set()
        self._wake.set()
        self.queue.shut_down(timeout_s)

    def alive(self) -> int:
        return sum(1 for thread in self._threads if thread.is_alive())

    def _add_thread(self) -> None:
        thread = threading.Thread(
            target=self._run, name=f"{self.name}-{next(self._numbers)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _waits(self, key: K) -> None:
        self.queue.mark_stalled(key)
        self._wake.set()

    def _surplus(self) -> bool:
        return self.alive() - self.queue.stalled(self.stall_s) > self.count

    def _watch(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(self.stall_s / 4)
            self._wake.clear()
            self.watch_once()

    def watch_once(self) -> None:
        """Adds a thread for each stalled pass (by the queue's clock), so `count` passes can
        always run."""
        self._threads = [thread for thread in self._threads if thread.is_alive()]
        running = self.alive() - self.queue.stalled(self.stall_s)
        for _ in range(min(self.count - running, self.max_threads - self.alive())):
            self._add_thread()

    def _run(self) -> None:
        while not self._stopping.is_set():
            key = self.queue.get(timeout=self.stall_s)
            if key is not None:
                _passing.mark = partial(self._waits, key)
                try:
                    self.work(key)
                except Exception:  # work keeps its own failures; this is a bug in it
                    log.exception("%s: pass of %s crashed", self.name, key)
                    self.queue.add_rate_limited(key)
                finally:
                    _passing.mark = None
                    self.queue.done(key)
            if self._surplus():
                return
