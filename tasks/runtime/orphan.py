"""How a task runtime's process ends when nobody drives it any more, and how fast it ends on
SIGTERM.

A host application, or a task process, runs in a session of its own so that the next overlord
adopts it. When no overlord comes back it would read on for good, from brokers that may be
gone. So each one keeps the time of the last call it took with its token (`Contact`, fed by
`Heard` around its one ASGI app): a leader's probe or command to one of its tasks, the runner's
list of its tasks (the overlord's own, or a task host's agent asked by an overlord's sync).
Past `orphan_timeout_s` (`SLUICEGATE_ORPHAN_TIMEOUT_S`, 10 minutes by default, well above a
lease and a pass) with no such call, `Watchdog` stops its tasks without publishing (what they
read is read again by their successors) and the process exits.

SIGTERM asks for a graceful stop (each task publishes what it read). `exit_by` bounds it: a
process still alive `SIGTERM_BOUND_S` after the signal exits at once, its tasks unpublished.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from tasks.protocol import TOKEN_HEADER

log = logging.getLogger(__name__)
DEFAULT_ORPHAN_TIMEOUT_S = 600.0
SIGTERM_BOUND_S = 25.0  # a SIGTERM ends the process within this (Druid's peons: 5 min)
GRACEFUL_S = 15.0  # of which the tasks' graceful stop (their publishes) may take this
ORPHANED_EXIT = 3  # the exit code of a process that stopped for want of an overlord


class Contact:
    """When a caller with the token was last heard (monotonic seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last = clock()

    def heard(self) -> None:
        self.last = self.clock()

    def quiet_s(self) -> float:
        return self.clock() - self.last


class Heard:
    """An ASGI app that records `contact` for every HTTP answer to a call that shows a token
    (TOKEN_HEADER) but a refusal of it (401, 403): a caller that knows the token is the
    overlord (or the agent or operator acting for it)."""

    def __init__(self, app: Any, contact: Contact) -> None:
        self.app = app
        self.contact = contact

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        token = TOKEN_HEADER.lower().encode()
        if scope["type"] != "http" or not any(k == token for k, _ in scope.get("headers", ())):
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] not in (401, 403):
                self.contact.heard()
            await send(message)

        await self.app(scope, receive, sending)


class Watchdog:
    """A thread that calls `orphaned` once `contact` has been quiet for `timeout_s`
    (0: never)."""

    def __init__(
        self,
        contact: Contact,
        timeout_s: float,
        orphaned: Callable[[], None],
        every_s: float | None = None,
    ) -> None:
        self.contact = contact
        self.timeout_s = timeout_s
        self.orphaned = orphaned
        self.every_s = every_s if every_s is not None else min(10.0, max(0.1, timeout_s / 20))
        self.stopping = threading.Event()
        self.fired = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="orphan-watchdog", daemon=True)

    def start(self) -> None:
        if self.timeout_s > 0:
            self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def _watch(self) -> None:
        while not self.stopping.wait(self.every_s):
            quiet = self.contact.quiet_s()
            if quiet < self.timeout_s:
                continue
            log.warning(
                "no overlord has called for %.0f s (orphan timeout %.0f s): stopping every "
                "task without publishing, and exiting",
                quiet,
                self.timeout_s,
            )
            self.fired.set()
            self.orphaned()
            return


def exit_by(bound_s: float, code: int = 1) -> threading.Timer:
    """A started timer that ends the process at once (its Spark JVM follows: PySpark's gateway
    exits when its Python driver's pipe closes) if it is still alive after `bound_s`."""

    def _now() -> None:
        log.warning("still stopping after %.0f s: exiting now, tasks unpublished", bound_s)
        logging.shutdown()
        os._exit(code)

    timer = threading.Timer(bound_s, _now)
    timer.daemon = True
    timer.start()
    return timer
