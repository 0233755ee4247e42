"""What the overlord asks of wherever tasks run: the Runner protocol, and what it answers.
LocalProcessRunner (local processes) implements it; so do the fakes of tests and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tasks.protocol import AnyTask, TaskReport


@dataclass(frozen=True)
class Launched:
    """Where a launched task serves its control API, with its token and log."""

    host: str
    port: int
    log_path: str
    token: str
    scheme: str = "http"  # https: the task serves its chat API with the overlord's TLS
    worker: str | None = None  # the task host (host:port) it runs on; None: this overlord's


class NoSlot(OSError):
    """No task host can take a task now (every live one is full, or none is alive). A
    supervisor's task waits for a slot, as a Druid task waits pending for a worker's."""


@dataclass(frozen=True)
class Exited:
    task_id: str
    exit_code: int | None  # None: a process adopted from an earlier overlord (not our child)
    report: TaskReport | None  # None: the task left none (or one that does not parse)
    reason: str | None = None  # why, when the runner knows better than the exit (a lost host)


class Runner(Protocol):
    def launch(self, task: AnyTask) -> Launched:
        """Start the task; raises OSError when it cannot be started."""
        ...

    def prepare(self) -> None:
        """Get ready to launch: start, in the background, what tasks will run in (the host's
        shared application); nothing where a task starts its own process."""
        ...

    def release(self) -> None:
        """Stop what `prepare` started if no task runs in it (tasks run on task hosts now)."""
        ...

    def is_running(self, task_id: str) -> bool: ...

    def kill(self, task_id: str) -> bool:
        """Kill a live task; True if it was alive. The killer records the outcome: `exited`
        never reports a killed task."""
        ...

    def adopt(self, task_id: str) -> bool:
        """Watch a task an earlier overlord started; False when it is gone."""
        ...

    def located(self, task_id: str) -> Launched | None:
        """Where a task started here serves its control API, from what its launch left in its
        work directory (an overlord that died right after a launch never recorded it); None
        when that is not known here."""
        ...

    def report(self, task_id: str) -> TaskReport | None:
        """The final report a task left, if any."""
        ...

    def exited(self) -> list[Exited]:
        """Tasks that ended since the last call, with their reports."""
        ...

    def kill_all(self) -> None: ...
