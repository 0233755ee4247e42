"""What the dev stack's single-process servers share: a process in a group of its own, stopped
with SIGTERM (SIGKILL after a while), usable as a context manager."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Self


class ServerProcess:
    """A server started by `start` (which sets `process`); `stop` ends its whole group."""

    process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        raise NotImplementedError

    def _spawn(
        self, command: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start the server's process in a group of its own, its output appended to `log`."""
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        return self.process

    def wait(self) -> int:
        assert self.process is not None
        return self.process.wait()

    def request_stop(self) -> None:
        """Ask it to shut down (safe from a signal handler: it does not wait)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
