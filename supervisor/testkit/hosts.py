"""Task hosts (`sluicegate worker`) as child processes, and the end of what they started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


@contextmanager
def task_host(
    overlord_url: str,
    work: Path,
    capacity: int = 4,
    args: tuple[str, ...] = ("--master", "local[1]"),
    env: dict[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A `sluicegate worker` process on a free port (its log beside `work`); yields its
    host:port once registered. On the way out it is stopped and its tasks SIGKILLed."""
    from supervisor.net import free_port

    port = free_port()
    command = [sys.executable, "-m", "supervisor.cli", "worker", "--overlord", overlord_url]
    command += ["--capacity", str(capacity), "--port", str(port), "--work-dir", str(work)]
    with (work.parent / f"{work.name}.log").open("ab") as log:
        process = subprocess.Popen(
            [*command, *args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            start_new_session=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(f"task host 127.0.0.1:{port} registered"), line
        yield f"127.0.0.1:{port}", process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
        kill_tasks(work)


def application_pid(work: Path) -> int | None:
    """The pid its shared application recorded under a work directory, if it ran one."""
    with suppress(OSError, ValueError, KeyError):
        return int(json.loads((work / "host-app" / "app.json").read_text())["pid"])
    return None


def kill_tasks(work: Path) -> None:
    """SIGKILL every task process a task host started, and its shared application if it ran
    one (each leads its own process group)."""
    for pid_file in (work / "tasks").glob("*/pid"):
        with suppress(OSError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
    pid = application_pid(work)
    if pid is not None:
        with suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
