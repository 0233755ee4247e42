"""A task host given several overlords heartbeats through whichever takes it
(supervisor/worker/agent.py any_of)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from supervisor.settings import Settings
from supervisor.worker.agent import HeartbeatRefused, Identity, Send, WorkerAgent, any_of


class Overlord:
    def __init__(self, name: str) -> None:
        self.name = name
        self.refusal: HeartbeatRefused | None = None
        self.calls = 0

    def send(self, heartbeat: dict[str, Any]) -> Any:
        self.calls += 1
        if self.refusal is not None:
            raise self.refusal
        return {"by": self.name}


def senders(*overlords: Overlord) -> list[Send]:
    return [o.send for o in overlords]


def test_the_one_that_answered_last_is_asked_first() -> None:
    a, b = Overlord("a"), Overlord("b")
    send = any_of(senders(a, b))
    assert send({}) == {"by": "a"}
    a.refusal = HeartbeatRefused("cannot reach the service", None)
    assert send({}) == {"by": "b"}
    a.refusal = None
    calls = a.calls
    assert send({}) == {"by": "b"}  # b took the last: asked first, a not at all
    assert a.calls == calls
    b.refusal = HeartbeatRefused("cannot reach the service", None)
    assert send({}) == {"by": "a"}


def test_refused_by_all_says_why_an_overlord_that_answered_refused() -> None:
    a, b = Overlord("a"), Overlord("b")
    a.refusal = HeartbeatRefused("cannot reach the service", None)
    b.refusal = HeartbeatRefused("401 wrong credentials", 401)
    with pytest.raises(HeartbeatRefused) as raised:
        any_of(senders(a, b))({})
    assert raised.value.status_code == 401
    b.refusal = HeartbeatRefused("cannot reach the service", None)
    with pytest.raises(HeartbeatRefused) as raised:
        any_of(senders(a, b))({})
    assert raised.value.status_code is None


class Runner:
    def __init__(self, running: set[str]) -> None:
        self.running = running

    def is_running(self, task_id: str) -> bool:
        return task_id in self.running


def test_a_host_prunes_ended_tasks_directories_from_its_first_beats(tmp_path: Path) -> None:
    """The first prune comes with the first heartbeats, not PRUNE_EVERY_S after the start: a
    host killed more often than that kept every ended task's work directory."""
    tasks = tmp_path / "tasks"
    for task_id in ("ended", "running", "recent"):
        (tasks / task_id).mkdir(parents=True)
        (tasks / task_id / "task.log").write_text("...")
    hour_ago = time.time() - 3600
    for task_id in ("ended", "running"):
        for path in (tasks / task_id / "task.log", tasks / task_id):
            os.utime(path, (hour_ago, hour_ago))
    settings = Settings(work_dir=tmp_path, task_retention="PT10M")
    refusing = Overlord("gone")
    refusing.refusal = HeartbeatRefused("cannot reach the service", None)
    agent = WorkerAgent(Identity("127.0.0.1", 1, "http", 1, "0"), settings, refusing.send)
    agent.runner = Runner({"running"})  # type: ignore[assignment]
    agent.period = 0.05
    agent.start()
    try:
        deadline = time.monotonic() + 10
        while (tasks / "ended").exists():
            assert time.monotonic() < deadline, "not pruned within the first beats"
            time.sleep(0.05)
    finally:
        agent.stopping.set()
        agent.thread.join(10)
    assert sorted(p.name for p in tasks.iterdir()) == ["recent", "running"]
    assert refusing.calls >= 1  # the heartbeats went on, refused
