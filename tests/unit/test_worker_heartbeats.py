"""A task host given several overlords heartbeats through whichever takes it
(supervisor/worker/agent.py any_of)."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.worker.agent import HeartbeatRefused, Send, any_of


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
