"""PassScheduler: the passes of every supervisor's loop on a few shared threads."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from supervisor.controller.loop import SupervisorLoop

log = logging.getLogger(__name__)


class PassScheduler:
    """Runs the passes of every loop on a few threads, each loop's next pass at its own time
    (a heap of due times): at most one pass per loop at a time, a wake during a pass gives one
    more pass right after it, and a due pass waits only for a free worker. A thousand
    supervisors on a thread each spent their CPU handing the GIL around instead of passing.

    `workers` threads pass at once; a pass mostly computes and talks to the DB, so more of them
    only slice the one GIL finer (bench/control_plane.py, 1,000 supervisors: pass p99 during a
    rollover wave 40 ms with 2 workers, 82 with 4, 146 with 8, and the wave no faster). A pass
    stuck waiting (a task or broker slow to answer) must not hold up the others, though: a
    pass running longer than `stall_s` stops counting as a worker and a thread is added in its
    place (up to `max_workers` in all); when the stalled passes end, the surplus threads
    leave."""

    def __init__(self, workers: int, max_workers: int = 64, stall_s: float = 1.0) -> None:
        self.workers = workers
        self.max_workers = max(workers, max_workers)
        self.stall_s = stall_s
        self.cond = threading.Condition()
        self.heap: list[tuple[float, int, SupervisorLoop]] = []
        self.due: dict[SupervisorLoop, float] = {}  # the earliest pass scheduled for each loop
        self.running: dict[SupervisorLoop, float] = {}  # loop -> when its pass began
        self.again: set[SupervisorLoop] = set()  # woken while passing: pass again at once
        self.order = itertools.count()
        self.threads = 0  # worker threads alive
        self.numbers = itertools.count()
        self.stopping = False

    def start(self) -> None:
        with self.cond:
            for _ in range(self.workers):
                self._add_worker()
        threading.Thread(target=self._watch, name="supervisor-pass-watch", daemon=True).start()

    def _add_worker(self) -> None:
        """(under cond)"""
        self.threads += 1
        name = f"supervisor-pass-{next(self.numbers)}"
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def _stalled(self, now: float) -> int:
        """(under cond) Passes running longer than stall_s."""
        return sum(1 for began in self.running.values() if now - began > self.stall_s)

    def _watch(self) -> None:
        """Adds a worker for each stalled pass, so `workers` passes can always run."""
        with self.cond:
            while not self.stopping:
                now = time.monotonic()
                short = self.workers - (self.threads - self._stalled(now))
                for _ in range(min(short, self.max_workers - self.threads)):
                    self._add_worker()
                self.cond.wait(self.stall_s / 4)

    def schedule(self, loop: SupervisorLoop, delay: float) -> None:
        """A pass of `loop` in `delay` seconds, unless one is due sooner (a negative delay puts
        it ahead of the passes that are due)."""
        at = time.monotonic() + delay
        with self.cond:
            if loop in self.running:
                if delay <= 0:
                    self.again.add(loop)
                return
            if self.due.get(loop, float("inf")) <= at:
                return
            self.due[loop] = at
            heapq.heappush(self.heap, (at, next(self.order), loop))
            self.cond.notify()

    def _next(self) -> SupervisorLoop | None:
        """The next due loop, waiting for it; None when stopping, or when this thread is one
        more than `workers` plus the stalled passes need (it leaves)."""
        with self.cond:
            while not self.stopping:
                now = time.monotonic()
                if self.threads - self._stalled(now) > self.workers:
                    break
                if self.heap and self.due.get(self.heap[0][2]) != self.heap[0][0]:
                    heapq.heappop(self.heap)  # superseded by a sooner pass of the same loop
                    continue
                wait = self.heap[0][0] - now if self.heap else None
                if wait is not None and wait <= 0:
                    _, _, loop = heapq.heappop(self.heap)
                    del self.due[loop]
                    self.running[loop] = now
                    return loop
                # a stalled pass can end while every thread waits: look again by then
                self.cond.wait(self.stall_s if wait is None else min(wait, self.stall_s))
            self.threads -= 1
        return None

    def _work(self) -> None:
        while (loop := self._next()) is not None:
            delay: float | None = None
            try:
                if not loop.stopping.is_set():
                    delay = loop.step()
            except Exception:  # step keeps a pass's own failures; this is a bug in it
                log.exception("supervisor %s: pass crashed", loop.supervisor_id)
                delay = loop.period_s
            with self.cond:
                del self.running[loop]
                if loop in self.again:
                    self.again.discard(loop)
                    delay = None if delay is None else min(delay, 0.0)
                if self.stopping:
                    self.cond.notify_all()  # stop() waits for passes to end
                # (else nobody needs waking: this worker takes the next due pass itself, and a
                # notify_all here woke every idle worker after every pass, to wait again)
            if delay is not None and not loop.stopping.is_set():
                self.schedule(loop, delay)

    def stop(self, timeout: float = 10.0) -> None:
        """No new passes; wait up to `timeout` for the running ones."""
        deadline = time.monotonic() + timeout
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
            while self.running and time.monotonic() < deadline:
                self.cond.wait(max(0.0, deadline - time.monotonic()))
