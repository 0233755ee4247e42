"""The work queue and its workers: one pass per key at a time, wakes merged, delayed and
backed-off requeues, a key put first, and threads added in place of stalled passes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from supervisor.controller.workers import Workers, waits
from supervisor.controller.workqueue import WorkQueue


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def until(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


def test_a_key_is_queued_once_and_never_handed_out_twice_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    for _ in range(3):
        queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    assert queue.get(timeout=0) == "a"
    queue.add("a")  # added while "a" is worked on: not handed out meanwhile
    assert queue.get(timeout=0) == "b"
    assert queue.get(timeout=0) is None
    queue.done("a")  # ...but once more right after
    assert queue.get(timeout=0) == "a"


def test_add_after_waits_and_the_sooner_time_wins() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 10)
    queue.add_after("a", 30)  # later than queued: no change
    assert queue.get(timeout=0) is None
    clock.now += 10
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    queue.add_after("a", 30)
    queue.add_after("a", 5)  # sooner: replaces it
    clock.now += 5
    assert queue.get(timeout=0) == "a"


def test_a_timed_add_during_the_work_is_kept_for_after_it() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add_after("a", 1)  # what a pass asks for its next one
    clock.now += 2
    assert queue.get(timeout=0) is None  # due, but still worked on
    queue.done("a")
    assert queue.get(timeout=0) == "a"


def test_a_get_waits_without_spinning_while_the_only_due_key_is_worked_on() -> None:
    calls = [0]

    def counting_clock() -> float:
        calls[0] += 1
        return time.monotonic()

    queue: WorkQueue[str] = WorkQueue(clock=counting_clock)
    queue.add("a")
    queue.add_after("b", 30)  # the next due time after "a"
    assert queue.get(timeout=0) == "a"
    queue.add_after("a", 0.01)
    time.sleep(0.03)  # "a" is due again, and still worked on
    got: list[str | None] = []
    taker = threading.Thread(target=lambda: got.append(queue.get(timeout=10)))
    taker.start()
    time.sleep(0.3)
    before = calls[0]
    time.sleep(0.3)
    assert calls[0] - before <= 2  # asleep, not polling the clock
    assert got == []
    queue.done("a")
    taker.join(5)
    assert got == ["a"]
    assert len(queue) == 1  # "b", still ahead


def test_backoff_doubles_per_failure_up_to_its_cap_and_forget_resets_it() -> None:
    queue: WorkQueue[str] = WorkQueue(base_backoff_s=1.0, max_backoff_s=5.0, clock=FakeClock())
    delays = [queue.add_rate_limited("a") for _ in range(5)]
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0] and queue.failures("a") == 5
    assert queue.add_rate_limited("a", at_most=3.0) == 3.0
    queue.forget("a")
    assert queue.add_rate_limited("a") == 1.0
    assert queue.add_rate_limited("b") == 1.0  # per key


def test_a_key_put_first_goes_before_keys_already_due() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for number in range(5):
        queue.add(f"due{number}")
        clock.now += 1
    queue.add("rolled", first=True)
    assert queue.get(timeout=0) == "rolled"
    assert [queue.get(timeout=0) for _ in range(5)] == [f"due{n}" for n in range(5)]


def test_first_is_kept_for_a_key_added_while_worked_on() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=FakeClock())
    queue.add("rolled")
    assert queue.get(timeout=0) == "rolled"
    queue.add("other")
    queue.add("rolled", first=True)
    queue.done("rolled")
    assert queue.get(timeout=0) == "rolled"


def test_get_wakes_when_a_key_is_added_and_shut_down_stops_handing_out() -> None:
    queue: WorkQueue[str] = WorkQueue()
    got: list[str | None] = []
    taker = threading.Thread(target=lambda: got.append(queue.get(timeout=5)))
    taker.start()
    time.sleep(0.05)
    queue.add("a")
    taker.join(5)
    assert got == ["a"]
    queue.done("a")
    queue.add("b")
    queue.shut_down(timeout_s=0)
    assert queue.get(timeout=0) is None and queue.shutting_down


class Passes:
    """Counts each key's passes; a pass of a key named stuck... waits for `release`."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.inside: dict[str, int] = {}
        self.most_inside = 0
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.release.set()

    def __call__(self, key: str) -> None:
        with self.lock:
            self.inside[key] = self.inside.get(key, 0) + 1
            self.most_inside = max(self.most_inside, self.inside[key])
        if key.startswith("stuck"):
            self.release.wait(10)
        with self.lock:
            self.inside[key] -= 1
            self.count[key] = self.count.get(key, 0) + 1


def test_workers_pass_each_key_once_at_a_time_and_wakes_merge() -> None:
    queue: WorkQueue[str] = WorkQueue()
    passes = Passes()
    passes.release.clear()
    workers = Workers(queue, passes, count=4)
    workers.start()
    queue.add("stuck")
    assert until(lambda: passes.inside.get("stuck") == 1)
    for _ in range(5):  # woken five times while passing: one more pass, not five
        queue.add("stuck")
    passes.release.set()
    assert until(lambda: passes.count.get("stuck") == 2)
    assert until(lambda: queue.working() == 0)  # done, and nothing queued after it
    assert len(queue) == 0
    workers.stop()
    assert passes.count["stuck"] == 2 and passes.most_inside == 1


def test_a_stalled_pass_gets_a_thread_in_its_place_that_leaves_after_it() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    passes = Passes()
    passes.release.clear()
    workers = Workers(queue, passes, count=1, max_threads=4, stall_s=0.1)
    workers.start(watch=False)  # the test is the watcher, on its own clock
    queue.add("stuck")
    assert until(lambda: passes.inside.get("stuck") == 1)
    workers.watch_once()
    assert workers.alive() == 1  # not stalled yet
    clock.now += 1.0
    workers.watch_once()
    for _ in range(5):  # another key passes on while the first one hangs
        queue.add("other")
        assert until(lambda n=_: passes.count.get("other", 0) > n)
    assert workers.alive() == 2
    passes.release.set()
    assert until(lambda: workers.alive() == 1)  # the added thread leaves once it ends
    queue.add("other")
    assert until(lambda: passes.count["other"] == 6)  # and the one left goes on passing
    workers.stop()
    assert passes.count["stuck"] == 1


def test_a_pass_that_says_it_waits_gets_a_thread_in_its_place_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    release = threading.Event()
    other: list[float] = []

    def passes(key: str) -> None:
        if key == "pausing":
            waits()  # as a pass does before it pauses a task
            release.wait(10)
        else:
            other.append(time.monotonic())

    workers = Workers(queue, passes, count=1, max_threads=4, stall_s=10.0)
    workers.start()
    queue.add("pausing")
    assert until(lambda: workers.alive() == 2)
    began = time.monotonic()
    queue.add("other")
    assert until(lambda: len(other) == 1)
    assert other[0] - began < 1.0  # not after stall_s (10 s)
    release.set()
    assert until(lambda: workers.alive() == 1)
    workers.stop()
    waits()  # outside a pass: nothing to mark


def test_threads_added_for_stalled_passes_stop_at_max_threads() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    passes = Passes()
    passes.release.clear()
    workers = Workers(queue, passes, count=1, max_threads=2, stall_s=0.05)
    workers.start(watch=False)
    for number in range(3):
        queue.add(f"stuck{number}")
    assert until(lambda: sum(passes.inside.values()) == 1)
    clock.now += 1.0
    workers.watch_once()  # stalled: a second thread
    assert until(lambda: sum(passes.inside.values()) == 2)
    for _ in range(6):  # both stalled, six times over: no third thread
        clock.now += 1.0
        workers.watch_once()
    assert sum(passes.inside.values()) == 2 and workers.alive() == 2
    passes.release.set()
    assert until(lambda: sum(passes.count.values()) == 3)
    workers.stop()


def test_a_crashed_pass_is_retried_after_its_backoff() -> None:
    queue: WorkQueue[str] = WorkQueue(base_backoff_s=0.05)
    calls: list[float] = []

    def crash(key: str) -> None:
        calls.append(time.monotonic())
        raise RuntimeError("a bug in the pass")

    workers = Workers(queue, crash, count=1)
    workers.start()
    queue.add("a")
    assert until(lambda: len(calls) >= 3)
    workers.stop()
    assert calls[2] - calls[1] >= calls[1] - calls[0] >= 0.04  # 50 ms, then 100 ms


def test_a_key_due_and_woken_during_its_work_is_handed_out_once_after_it() -> None:
    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    queue.add_after("a", 1)
    clock.now += 2
    assert queue.get(timeout=0) is None  # due, worked on: parked
    queue.add("a")  # and woken too
    queue.done("a")
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    assert queue.get(timeout=0) is None and len(queue) == 0
