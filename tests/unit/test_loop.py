"""The loop service base (supervisor/loop.py): runs at its cadence, a failed run is told and
the loop goes on, a good run after failures is told, and stop ends the thread."""

from __future__ import annotations

import threading

from supervisor.loop import Loop


class Counting(Loop):
    name = "counting"

    def __init__(self, fail_first: int) -> None:
        self.runs = 0
        self.fail_first = fail_first
        self.failures: list[str] = []
        self.recovered = threading.Event()
        super().__init__(every_s=0.01)

    def run_once(self) -> None:
        self.runs += 1
        if self.runs <= self.fail_first:
            raise RuntimeError(f"run {self.runs}")

    def failed(self, exc: Exception) -> None:
        self.failures.append(str(exc))

    def succeeded(self) -> None:
        if self.failures:
            self.recovered.set()


def test_a_failed_run_is_told_and_the_loop_goes_on() -> None:
    loop = Counting(fail_first=2)
    loop.start()
    assert loop.recovered.wait(10)
    loop.stop()
    assert not loop.thread.is_alive()
    assert loop.failures == ["run 1", "run 2"] and loop.runs >= 3


def test_a_stopped_loop_runs_no_more() -> None:
    loop = Counting(fail_first=0)
    loop.start()
    loop.stop()
    runs = loop.runs
    assert not loop.thread.is_alive() and loop.runs == runs
    assert loop.thread.name == "counting"
