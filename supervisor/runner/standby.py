"""Standby task processes: Spark drivers started and warmed before their task exists.

A reconcile pass asks for standbys (`reserve`) when a task group's `taskDuration` will end
within `standby_lead_s`; the runner keeps that many warm for the group, and when the group's
successors are launched each takes one (`take`) instead of starting a Spark driver from cold.
So a rollover costs a pause, an HTTP call and a warm batch, not a JVM start-up.
A reservation lapses when it is not renewed; a standby left without one for `standby_idle_s`
is stopped (a group rolled over late, or its tasks were restarted, may still take it
meanwhile), and one that exits on its own is forgotten.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from supervisor.runner.files import write_private
from tasks.protocol import TOKEN_HEADER, IndexKafkaTask
from tasks.standby import ASSIGN_PATH, STATUS_PATH

log = logging.getLogger(__name__)
Key = tuple[str, int]  # (supervisor id, task group)


@dataclass
class Standby:
    slot: Path
    process: subprocess.Popen[bytes]
    port: int
    token: str
    key: Key
    started: float
    log_path: Path
    unwanted_since: float | None = None  # when its group's reservation lapsed

    def alive(self) -> bool:
        return self.process.poll() is None

    def state(self, timeout: float = 2.0) -> str:
        """WARMING or WARM as the standby says; GONE when it does not answer."""
        try:
            answer = httpx.get(
                f"http://127.0.0.1:{self.port}{STATUS_PATH}",
                headers={TOKEN_HEADER: self.token},
                timeout=timeout,
            )
            return str(answer.json()["status"]) if answer.status_code == 200 else "GONE"
        except (httpx.HTTPError, ValueError, KeyError):
            return "GONE"

    def assign(self, task: IndexKafkaTask, token: str, timeout: float = 10.0) -> None:
        """Hand the standby its task; raises OSError when it cannot take it."""
        try:
            answer = httpx.post(
                f"http://127.0.0.1:{self.port}{ASSIGN_PATH}",
                headers={TOKEN_HEADER: self.token},
                json={"payload": task.to_json(), "token": token},
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            raise OSError(f"standby {self.slot.name} did not answer: {exc}") from exc
        if answer.status_code != 200:
            raise OSError(f"standby {self.slot.name} refused the task: {answer.text[:300]}")


@dataclass
class Reservation:
    count: int
    expires: float
    template: str = "{}"  # the JSON of a task like the group's next, to warm up on


Spawn = Callable[[Path, str], tuple[subprocess.Popen[bytes], int, Path]]  # (slot, token)


@dataclass(frozen=True)
class StandbyView:
    slot: str
    supervisor: str
    group: int
    pid: int


class StandbyPool:
    """Warm standbys per (supervisor, group), up to `limit` in all."""

    def __init__(
        self,
        root: Path,
        spawn: Spawn,
        limit: int,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.spawn = spawn
        self.limit = limit
        self.idle_s = idle_s
        self.clock = clock
        self.lock = threading.Lock()
        self.standbys: list[Standby] = []
        self.reservations: dict[Key, Reservation] = {}

    def reserve(self, key: Key, count: int, template: str, ttl_s: float) -> int:
        """Keep `count` standbys warm for `key` for the next `ttl_s` (renewed by each call);
        the number started now."""
        with self.lock:
            self.reservations[key] = Reservation(count, self.clock() + ttl_s, template)
            return self._fill()

    def take(self, key: Key) -> Standby | None:
        """A live standby for the group (or one no reservation wants), the warmest first."""
        with self.lock:
            self._forget_dead()
            wanted = {k for k, r in self.reservations.items() if r.expires > self.clock()}
            fits = [s for s in self.standbys if s.key == key] or [
                s for s in self.standbys if s.key not in wanted
            ]
            if not fits:
                return None
            chosen = min(fits, key=lambda s: s.started)
            self.standbys.remove(chosen)
            reservation = self.reservations.get(chosen.key)
            if reservation is not None:
                reservation.count -= 1
                if reservation.count <= 0:
                    del self.reservations[chosen.key]
            return chosen

    def tick(self) -> None:
        """Drop lapsed reservations, stop standbys nobody wants after `idle_s`, refill."""
        with self.lock:
            now = self.clock()
            self._forget_dead()
            for key in [k for k, r in self.reservations.items() if r.expires <= now]:
                del self.reservations[key]
            for standby in list(self.standbys):
                if standby.key in self.reservations:
                    standby.unwanted_since = None
                elif standby.unwanted_since is None:
                    standby.unwanted_since = now
                elif now - standby.unwanted_since > self.idle_s:
                    log.info("stopping standby %s: no group wants it", standby.slot.name)
                    self._stop(standby)
            self._fill()

    def discard(self, standby: Standby) -> None:
        """Stop a standby that was taken but could not become its task."""
        with self.lock:
            self.standbys.append(standby)
            self._stop(standby)

    def stop_all(self) -> None:
        with self.lock:
            self.reservations.clear()
            for standby in list(self.standbys):
                self._stop(standby)

    def describe(self) -> list[StandbyView]:
        with self.lock:
            return [
                StandbyView(s.slot.name, s.key[0], s.key[1], s.process.pid) for s in self.standbys
            ]

    # ---- under the lock -------------------------------------------------------------------

    def _forget_dead(self) -> None:
        for standby in [s for s in self.standbys if not s.alive()]:
            log.warning(
                "standby %s exited (%s); see %s",
                standby.slot.name,
                standby.process.returncode,
                standby.log_path,
            )
            self.standbys.remove(standby)

    def _fill(self) -> int:
        started = 0
        for key, reservation in self.reservations.items():
            have = sum(1 for s in self.standbys if s.key == key)
            while have < reservation.count and len(self.standbys) < self.limit:
                self.standbys.append(self._start(key, reservation.template))
                have += 1
                started += 1
        return started

    def _start(self, key: Key, template: str) -> Standby:
        slot = self.root / f"standby-{secrets.token_hex(6)}"
        slot.mkdir(parents=True)
        token = secrets.token_hex(16)
        write_private(slot / "standby-token", token)
        write_private(slot / "warm-payload.json", template)
        process, port, log_path = self.spawn(slot, token)
        log.info("standby %s started for %s group %s (pid %s)", slot.name, *key, process.pid)
        return Standby(slot, process, port, token, key, self.clock(), log_path)

    def _stop(self, standby: Standby) -> None:
        """SIGTERM the standby's process group (its JVM too), SIGKILL if it lingers."""
        self.standbys.remove(standby)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(standby.process.pid, sig)
                standby.process.wait(10)
                return
            except ProcessLookupError:
                standby.process.wait(10)
                return
            except subprocess.TimeoutExpired:
                continue


__all__ = ["Key", "Standby", "StandbyPool", "StandbyView"]
