"""What the dev stack's single-process servers share: a process in a group of its own, stopped
with SIGTERM (SIGKILL after a while), usable as a context manager."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Self

from supervisor.runner.spawn import spawn


class Managed:
    """A dev-stack server, started by `with` (its `start`) and stopped on the way out."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class ServerProcess(Managed):
    """A server started by `start` (which sets `process`); `stop` ends its whole group."""

    process: subprocess.Popen[bytes] | None = None

    def _spawn(
        self, command: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start the server's process in a group of its own, its output appended to `log`."""
        self.process = spawn(command, cwd, log, env)
        return self.process

    def exited(self) -> bool:
        """Whether its process was started and has ended."""
        return self.process is not None and self.process.poll() is not None

    def wait(self) -> int:
        assert self.process is not None
        return self.process.wait()

    def request_stop(self) -> None:
        """Ask it to shut down (safe from a signal handler: it does not wait)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            stop_group([process])


def stop_group(processes: list[subprocess.Popen[bytes]], timeout: float = 20.0) -> None:
    """SIGTERM each process's group, then wait for each; a group still there after `timeout`
    is SIGKILLed."""
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
