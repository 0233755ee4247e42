"""The group checkpoint protocol against fake task clients: races are retried, dead replicas
are given up at once, the maximum offsets win; a checkpoint that paused nobody is made again."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from supervisor.clients.task_api import TaskApiError
from supervisor.clock import utc_now
from supervisor.controller.requests import Intents, Pending
from supervisor.db.models import IntentRow
from supervisor.services.checkpoint import checkpoint_group


class FakeTask:
    """A task's control API as supervisor.clients.task_api.TaskClient describes it."""

    def __init__(self, offsets: dict[str, int], answers: list[int] | None = None) -> None:
        self.offsets = offsets
        self.answers = answers or [200]  # pause answers in turn; the last one repeats
        self.state = "READING"
        self.end: dict[str, int] | None = None
        self.reachable = True
        self.threads: set[threading.Thread] = set()

    def _reach(self) -> None:
        self.threads.add(threading.current_thread())
        if not self.reachable:
            raise TaskApiError(None, "task unreachable: ConnectError")

    def pause(self) -> dict[str, int] | None:
        self._reach()
        code = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if code == 409:
            raise TaskApiError(409, "not pausable")
        self.state = "PAUSED"  # (with 202 it pauses a moment later)
        return None if code == 202 else dict(self.offsets)

    def status(self) -> str:
        self._reach()
        return self.state

    def current_offsets(self) -> dict[str, int]:
        self._reach()
        return dict(self.offsets)

    def set_end_offsets(self, offsets: Mapping[str, int], finish: bool) -> None:
        self._reach()
        self.end, self.state = dict(offsets), "READING"

    def resume(self) -> None:
        raise AssertionError("resume")

    def end_offsets(self) -> dict[str, int]:
        raise AssertionError("end_offsets")

    def checkpoints(self) -> dict[str, dict[str, int]]:
        raise AssertionError("checkpoints")


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
    result = checkpoint_group({"only": task}, finish=True, sleep=lambda _: None)
    assert result.end_offsets == {"0": 4, "1": 6} and result.failed == []
    assert task.end == {"0": 4, "1": 6}
    assert task.threads == {threading.current_thread()}  # no pool started for one replica


class FakeExecutor:
    """Executor.checkpoints: the requests it could not make (no replica paused)."""

    def __init__(self, again: set[str]) -> None:
        self.again = again
        self.asked: dict[str, Mapping[str, int]] = {}

    def checkpoints(self, requested: Mapping[str, Mapping[str, int]], skip: set[int]) -> set[str]:
        self.asked = dict(requested)
        return self.again


def test_a_checkpoint_no_replica_could_be_paused_for_stays_pending() -> None:
    """A task whose pause came too late sits paused until its checkpoint is made: its intent
    is not marked done (the next pass makes it), the others' are."""
    paused_late = IntentRow(owner="s", kind="checkpoint", task_id="late", payload={})
    made = IntentRow(owner="s", kind="checkpoint", task_id="made", payload={})
    pending = Pending(checkpoints={"late": ({"0": 5}, [paused_late]), "made": ({"0": 7}, [made])})
    intents = Intents(utc_now)
    executor = FakeExecutor(again={"late"})
    assert intents.checkpoint(executor, pending, skip_groups=set())  # type: ignore[arg-type]
    assert executor.asked == {"late": {"0": 5}, "made": {"0": 7}}
    assert paused_late.done_at is None
    assert made.done_at is not None and made.outcome == "checkpoint asked of the group"
    executor.again = set()
    assert not intents.checkpoint(executor, pending, skip_groups=set())  # type: ignore[arg-type]
    assert paused_late.done_at is not None
