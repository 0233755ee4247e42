"""The orphan watchdog's rules (tasks/runtime/orphan.py): which calls count as an overlord's,
and when a quiet process gives up."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tasks.protocol import TOKEN_HEADER
from tasks.runtime.orphan import Contact, Heard, Watchdog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _answer(status: int) -> Any:
    async def app(_scope: Any, _receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


def _call(app: Any, token: bool = True) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(_message: Any) -> None:
        return None

    headers = [(TOKEN_HEADER.lower().encode(), b"t")] if token else []
    asyncio.run(app({"type": "http", "path": "/x", "headers": headers}, receive, send))


def test_only_calls_that_pass_the_token_count_as_heard() -> None:
    clock = Clock()
    contact = Contact(clock)
    clock.now = 150.0
    for refused in (401, 403):  # a caller without the token, or with another's
        _call(Heard(_answer(refused), contact))
    assert contact.quiet_s() == 50.0
    _call(Heard(_answer(404), contact), token=False)  # a caller with no token at all
    assert contact.quiet_s() == 50.0
    _call(Heard(_answer(404), contact))  # a caller past the token asked for something else
    assert contact.quiet_s() == 0.0
    clock.now = 160.0
    _call(Heard(_answer(200), contact))
    assert contact.quiet_s() == 0.0


def test_the_watchdog_fires_once_quiet_for_the_timeout_and_not_before() -> None:
    clock = Clock()
    contact = Contact(clock)
    fired: list[float] = []
    checked = threading.Event()

    def orphaned() -> None:
        fired.append(clock.now)

    watchdog = Watchdog(contact, 600.0, orphaned, every_s=0.01)
    watchdog.start()
    try:
        clock.now = 699.0
        checked.wait(0.2)
        assert fired == [] and not watchdog.fired.is_set()
        contact.heard()  # at 699: quiet again from there
        clock.now = 1298.0
        checked.wait(0.2)
        assert fired == []
        clock.now = 1299.0
        watchdog.thread.join(2)
        assert fired == [1299.0] and watchdog.fired.is_set()
        assert not watchdog.thread.is_alive()  # once
    finally:
        watchdog.stop()


def test_a_timeout_of_zero_never_starts_the_watchdog() -> None:
    watchdog = Watchdog(Contact(), 0.0, lambda: None)
    watchdog.start()
    assert not watchdog.thread.is_alive()
