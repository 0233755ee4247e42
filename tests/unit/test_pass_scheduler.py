"""PassScheduler: the passes of many loops on a few threads, one pass per loop at a time."""

from __future__ import annotations

import threading
import time
from typing import Any

from supervisor.controller.scheduler import PassScheduler


class FakeLoop:
    """Counts its passes; each pass takes `seconds` and asks for the next in `every`."""

    def __init__(self, seconds: float = 0.0, every: float | None = None) -> None:
        self.seconds, self.every = seconds, every
        self.supervisor_id = "fake"
        self.period_s = 30.0
        self.stopping = threading.Event()
        self.passes = 0
        self.inside = 0
        self.most_inside = 0
        self.lock = threading.Lock()
        self.entered = threading.Event()

    def step(self) -> float | None:
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        self.entered.set()
        time.sleep(self.seconds)
        with self.lock:
            self.inside -= 1
            self.passes += 1
        return self.every


def until(check: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


def test_a_wake_during_a_pass_gives_one_more_pass_right_after_it() -> None:
    scheduler = PassScheduler(4)
    scheduler.start()
    loop = FakeLoop(seconds=0.3, every=60.0)  # none of its own accord within the test
    scheduler.schedule(loop, 0)  # type: ignore[arg-type]
    assert loop.entered.wait(5)
    for _ in range(5):  # woken five times while passing: one more pass, not five
        scheduler.schedule(loop, 0)  # type: ignore[arg-type]
    assert until(lambda: loop.passes == 2)
    time.sleep(0.5)
    assert loop.passes == 2 and loop.most_inside == 1
    scheduler.stop()


def test_each_loop_passes_at_its_own_time_and_never_twice_at_once() -> None:
    scheduler = PassScheduler(2)
    scheduler.start()
    fast = FakeLoop(seconds=0.01, every=0.05)
    slow = FakeLoop(seconds=0.01, every=10.0)
    busy = FakeLoop(seconds=0.2, every=0.0)
    for loop in (fast, slow, busy):
        scheduler.schedule(loop, 0)  # type: ignore[arg-type]
    time.sleep(1.0)
    scheduler.stop()
    assert slow.passes == 1  # its next pass is due in ten seconds
    assert fast.passes >= 8  # every 50 ms, though `busy` passes without a break
    assert 3 <= busy.passes <= 6
    assert max(loop.most_inside for loop in (fast, slow, busy)) == 1


def test_a_sooner_pass_replaces_a_later_one_and_stop_waits_for_running_passes() -> None:
    scheduler = PassScheduler(1)
    scheduler.start()
    loop = FakeLoop(seconds=0.4, every=None)  # None: the supervisor is gone, no more passes
    scheduler.schedule(loop, 60)  # type: ignore[arg-type]
    scheduler.schedule(loop, 0)  # type: ignore[arg-type]
    assert loop.entered.wait(5)
    began = time.monotonic()
    scheduler.stop()
    assert loop.passes == 1 and time.monotonic() - began >= 0.2  # stop waited for it
    scheduler.schedule(loop, 0)  # type: ignore[arg-type]
    time.sleep(0.2)
    assert loop.passes == 1  # a stopped scheduler starts none


def test_a_pass_scheduled_ahead_goes_before_the_passes_already_due() -> None:
    scheduler = PassScheduler(1)
    order: list[str] = []

    class Named(FakeLoop):
        def __init__(self, name: str) -> None:
            super().__init__(seconds=0.05, every=60.0)
            self.name = name

        def step(self) -> float | None:
            order.append(self.name)
            return super().step()

    queued = [Named(f"due{number}") for number in range(5)]
    for loop in queued:
        scheduler.schedule(loop, -1.0)  # type: ignore[arg-type]
    rolled = Named("rolled")
    scheduler.schedule(rolled, -3600.0)  # type: ignore[arg-type]  # as after a rollover
    scheduler.start()
    assert until(lambda: len(order) == 6)
    scheduler.stop()
    assert order[0] == "rolled" and sorted(order[1:]) == [f"due{n}" for n in range(5)]


class StuckLoop(FakeLoop):
    """A pass that waits until released (a task or broker that does not answer)."""

    def __init__(self) -> None:
        super().__init__(every=None)
        self.release = threading.Event()

    def step(self) -> float | None:
        self.entered.set()
        self.release.wait(10)
        with self.lock:
            self.passes += 1
        return None


def test_a_stalled_pass_gets_a_thread_in_its_place_that_leaves_after_it() -> None:
    scheduler = PassScheduler(1, max_workers=4, stall_s=0.1)
    stuck, other = StuckLoop(), FakeLoop(seconds=0.0, every=0.02)
    scheduler.schedule(stuck, -1.0)  # type: ignore[arg-type]  # takes the only worker first
    scheduler.schedule(other, 0)  # type: ignore[arg-type]
    scheduler.start()
    assert stuck.entered.wait(5)
    assert until(lambda: other.passes >= 5)  # passes on while the first one hangs
    assert scheduler.threads == 2 and stuck.passes == 0
    stuck.release.set()
    assert until(lambda: scheduler.threads == 1)  # the added thread leaves once it ends
    passes = other.passes
    assert until(lambda: other.passes > passes)  # and the one left goes on passing
    scheduler.stop()
    assert stuck.passes == 1


def test_threads_added_for_stalled_passes_stop_at_max_workers() -> None:
    scheduler = PassScheduler(1, max_workers=2, stall_s=0.05)
    stuck = [StuckLoop() for _ in range(3)]
    for loop in stuck:
        scheduler.schedule(loop, 0)  # type: ignore[arg-type]
    scheduler.start()
    assert until(lambda: sum(loop.entered.is_set() for loop in stuck) == 2)
    time.sleep(0.3)  # stalled six times over: still no third thread
    assert sum(loop.entered.is_set() for loop in stuck) == 2 and scheduler.threads == 2
    for loop in stuck:
        loop.release.set()
    assert until(lambda: all(loop.passes == 1 for loop in stuck))
    scheduler.stop()
