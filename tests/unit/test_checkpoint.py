"""The group checkpoint protocol against fake task clients: races are retried, dead replicas
are given up at once, the maximum offsets win."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from supervisor.clients.task_api import TaskApiError
from supervisor.services.checkpoint import checkpoint_group


class FakeTask:
    def __init__(self, offsets: dict[str, int], answers: list[int] | None = None) -> None:
        self.offsets = offsets
        self.answers = answers or [200]  # pause answers in turn; the last one repeats
        self.status = "READING"
        self.end: dict[str, int] | None = None
        self.reachable = True

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        if not self.reachable:
            raise TaskApiError(None, "task unreachable: ConnectError")
        if path == "/pause":
            code = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            if code == 409:
                raise TaskApiError(409, "not pausable")
            if code == 202:
                self.status = "PAUSED"  # it pauses a moment later
                return httpx.Response(202, json={"status": "pausing"})
            self.status = "PAUSED"
            return httpx.Response(200, json=self.offsets)
        if path == "/offsets/end":
            self.end = kwargs["json"]
            self.status = "READING"
            return httpx.Response(200, json=self.end)
        raise AssertionError(path)

    def get(self, path: str) -> Any:
        if not self.reachable:
            raise TaskApiError(None, "task unreachable: ConnectError")
        return {"/status": self.status, "/offsets/current": self.offsets}[path]


def test_maximum_offsets_win_and_races_are_retried() -> None:
    a = FakeTask({"0": 10, "1": 7}, answers=[409, 200])
    b = FakeTask({"0": 8, "1": 9}, answers=[202])
    result = checkpoint_group({"a": a, "b": b}, finish=True, sleep=lambda _: None)
    assert result.end_offsets == {"0": 10, "1": 9} and result.failed == []
    assert a.end == b.end == {"0": 10, "1": 9}


def test_a_dead_replica_is_given_up_at_once() -> None:
    alive, dead = FakeTask({"0": 5}), FakeTask({"0": 9})
    dead.reachable = False
    began = time.monotonic()
    result = checkpoint_group(
        {"alive": alive, "dead": dead},
        finish=True,
        timeout=30,
        alive=lambda task_id: task_id != "dead",
    )
    assert time.monotonic() - began < 5  # not the 30 s deadline
    assert result.end_offsets == {"0": 5} and result.failed == ["dead"]
    assert alive.end == {"0": 5}


def test_an_unreachable_replica_is_retried_until_the_deadline() -> None:
    gone = FakeTask({"0": 1})
    gone.reachable = False
    result = checkpoint_group({"gone": gone}, finish=False, timeout=0.3)
    assert result.end_offsets is None and result.failed == ["gone"]


def test_a_single_replica_is_paused_in_the_callers_thread() -> None:
    task = FakeTask({"0": 4, "1": 6}, answers=[409, 200])
    threads = set()
    paused = task.call

    def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
        threads.add(threading.current_thread())
        return paused(method, path, **kwargs)

    task.call = call  # type: ignore[method-assign]
    result = checkpoint_group({"only": task}, finish=True, sleep=lambda _: None)
    assert result.end_offsets == {"0": 4, "1": 6} and result.failed == []
    assert task.end == {"0": 4, "1": 6}
    assert threads == {threading.current_thread()}  # no pool started for one replica
