"""A per-key work queue, as controller-runtime's: the only locks of the controller live here.

A key (a supervisor id) is queued at most once; a key being worked on is never handed out
again until `done`, and a key added meanwhile is worked on once more right after (however
often it was added). `add_after` queues a key for later (the earliest time asked wins);
`add_rate_limited` queues it after its own backoff, doubling on each call up to a cap until
`forget` resets it. `first=True` puts a key ahead of every key already due.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
AHEAD_S = 3600.0  # a `first` key is due this long before now: ahead of any real due time


class WorkQueue(Generic[K]):
    def __init__(
        self,
        base_backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_backoff_s = base_backoff_s
        self.max_backoff_s = max_backoff_s
        self.clock = clock
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}  # queued keys -> when each is due
        self._processing: dict[K, float] = {}  # keys handed out -> since when
        self._parked: dict[K, float] = {}  # came due while worked on -> due time, till `done`
        self._dirty: dict[K, bool] = {}  # added while processing -> (first) once done
        self._failures: dict[K, int] = {}
        self._order = itertools.count()
        self._shutting_down = False

    # ---- adding -----------------------------------------------------------------------------

    def add(self, key: K, *, first: bool = False) -> None:
        """Queue `key` now (ahead of every key already due with `first`)."""
        self._add(key, self.clock() - AHEAD_S if first else self.clock(), now=True, first=first)

    def add_after(self, key: K, delay_s: float) -> None:
        """Queue `key` in `delay_s` seconds, unless it is queued sooner already."""
        if delay_s <= 0:
            self.add(key)
        else:
            self._add(key, self.clock() + delay_s, now=False, first=False)

    def add_rate_limited(self, key: K, at_most: float | None = None) -> float:
        """Queue `key` after its backoff (base, doubled per failure since `forget`, capped;
        no later than `at_most` seconds); the delay chosen."""
        with self._cond:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = min(self.max_backoff_s, self.base_backoff_s * float(2 ** min(failures, 30)))
        if at_most is not None:
            delay = min(delay, at_most)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """`key` succeeded: its next backoff starts from the base again."""
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def _add(self, key: K, at: float, now: bool, first: bool) -> None:
        with self._cond:
            if self._shutting_down:
                return
            if key in self._processing and now:  # once more right after the pass under way
                self._dirty[key] = self._dirty.get(key, False) or first
                return
            # (a timed add during a pass waits in the heap until the pass is done)
            if self._due.get(key, float("inf")) <= at:
                return
            self._due[key] = at
            heapq.heappush(self._heap, (at, next(self._order), key))
            self._cond.notify()

    # ---- working ----------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> K | None:
        """The next due key, marked as being worked on; None when shut down or after
        `timeout` seconds without one."""
        deadline = None if timeout is None else self.clock() + timeout
        with self._cond:
            while not self._shutting_down:
                now = self.clock()
                key = self._pop_due(now)
                if key is not None:
                    self._processing[key] = now
                    return key
                waits = [w for w in (self._next_due(now), _left(deadline, now)) if w is not None]
                if deadline is not None and now >= deadline:
                    return None
                self._cond.wait(min(waits) if waits else None)
        return None

    def done(self, key: K) -> None:
        """The work on `key` is over; a key added meanwhile is queued again at once."""
        with self._cond:
            self._processing.pop(key, None)
            again = self._dirty.pop(key, None)
            parked = self._parked.pop(key, None)
            if self._shutting_down:
                self._cond.notify_all()
                return
            if parked is not None and self._due.get(key) == parked:
                # a timed add that came due during the pass: a waiting get() may take it now
                # (no get is woken otherwise: one woken after every pass only waits again)
                heapq.heappush(self._heap, (parked, next(self._order), key))
                if again is None:
                    self._cond.notify()
        if again is not None:
            self.add(key, first=again)

    def _pop_due(self, now: float) -> K | None:
        """(under the lock) The first due key not being worked on, dropping superseded heap
        entries; a due key still being worked on is parked until its `done`."""
        while self._heap and self._heap[0][0] <= now:
            at, _, key = heapq.heappop(self._heap)
            if self._due.get(key) != at:
                continue  # superseded by a sooner add of the same key
            if key in self._processing:
                self._parked[key] = at
                continue
            del self._due[key]
            return key
        return None

    def _next_due(self, now: float) -> float | None:
        """(under the lock, after `_pop_due`) Seconds until the earliest queued key is due."""
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)  # superseded
        return max(0.0, self._heap[0][0] - now) if self._heap else None

    # ---- what it holds ----------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys queued (due or not), those being worked on left out."""
        with self._cond:
            return len(self._due)

    def working(self) -> int:
        """Keys handed out and not yet done."""
        with self._cond:
            return len(self._processing)

    def mark_stalled(self, key: K) -> None:
        """The work on `key` waits on something else from now on (a task's pause): it counts
        as stalled already, whatever `longer_than_s` a caller asks about."""
        with self._cond:
            if key in self._processing:
                self._processing[key] = float("-inf")

    def stalled(self, longer_than_s: float) -> int:
        """Keys worked on for longer than `longer_than_s`."""
        with self._cond:
            now = self.clock()
            return sum(1 for since in self._processing.values() if now - since > longer_than_s)

    def shut_down(self, timeout_s: float = 10.0) -> None:
        """No more keys are handed out; waits up to `timeout_s` for the work under way."""
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()
            deadline = self.clock() + timeout_s
            while self._processing and self.clock() < deadline:
                self._cond.wait(max(0.0, deadline - self.clock()))

    @property
    def shutting_down(self) -> bool:
        with self._cond:
            return self._shutting_down


def _left(deadline: float | None, now: float) -> float | None:
    return None if deadline is None else max(0.0, deadline - now)
