"""`sluicegate serve` as a child process: the quickstart's service, and the overlords the
end-to-end tests, the failover benchmark and the chaos runs start and kill
(supervisor/testkit/overlord.py). It serves once its health route answers."""

from __future__ import annotations

import ssl
import sys
import time
from pathlib import Path
from typing import Self

import httpx

from supervisor.devstack import DevstackError
from supervisor.devstack.server import ServerProcess


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "supervisor.cli", "serve", *args]


class LocalService(ServerProcess):
    def __init__(
        self,
        command: list[str],
        url: str,
        log: Path,
        cwd: Path,
        env: dict[str, str] | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.command, self.url, self.log, self.cwd = command, url, log, cwd
        self.env, self.verify = env, verify

    def start(self, timeout: float = 60.0) -> Self:
        """Started, once it serves; DevstackError (naming its log) when it exits or does not
        serve within `timeout` (and then it is stopped: nothing started is left running)."""
        process = self._spawn(self.command, self.log, self.cwd, self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise DevstackError(f"the service exited; see {self.log}")
            if self.serving():
                return self
            time.sleep(0.05)
        self.stop()
        raise DevstackError(f"the service did not come up; see {self.log}")

    def serving(self) -> bool:
        try:
            answer = httpx.get(f"{self.url}/status/health", timeout=1, verify=self.verify)
        except httpx.HTTPError:
            return False
        return answer.status_code == 200
