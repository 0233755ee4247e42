"""Fault points for the failover and chaos scenarios (tests/e2e/test_failover.py,
bench/chaos.py): named moments between two commit points of the overlord, at which a test
kills the overlord (or crashes its metadata DB) to prove that nothing is lost or doubled.

No production code calls anything here. `install` wraps the product's own functions at the
seams below, in the process that calls it: a test's own process (`installed`), or an overlord
started as `python -m supervisor.testkit.faults FILE serve ...`, which reads FILE whenever
it reaches a point and SIGKILLs itself there when the file names that point (the file is
the test's to write, so it chooses which overlord dies where while both run)."""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.clients.task_api import TaskApiClient
from supervisor.controller import execute
from supervisor.services.publish import PublishService
from supervisor.services.task_life import TaskLife
from tasks.protocol import PublishOutcome

log = logging.getLogger(__name__)

ROLLOVER_PAUSED = "rollover.paused"  # every replica paused, no end offsets set yet
ROLLOVER_ENDS_SET = "rollover.ends-set"  # end offsets set on the tasks, not yet recorded
PUBLISH_COMMITTED = "publish.committed"  # a publish committed, its answer not yet sent
TASK_RECORDED = "task.recorded"  # a task recorded in the metadata DB, not yet started

Listener = Callable[[str], None]


@dataclass(frozen=True)
class Seam:
    """Where a point is: on `owner.name`, before the call (when `before` says so of its
    arguments) or after it (when `after` says so of its result)."""

    owner: Any
    name: str
    before: Callable[..., bool] | None = None
    after: Callable[[Any], bool] | None = None


SEAMS: dict[str, Seam] = {
    # a rollover's checkpoint_group sets final end offsets (finish) on each replica only once
    # every one is paused: reached before the first of them (and again before each other)
    ROLLOVER_PAUSED: Seam(
        TaskApiClient, "set_end_offsets", before=lambda _self, _offsets, finish: bool(finish)
    ),
    # the executor's rollover calls checkpoint_group, then records what it set (or not)
    ROLLOVER_ENDS_SET: Seam(execute, "checkpoint_group", after=lambda _result: True),
    PUBLISH_COMMITTED: Seam(
        PublishService, "publish", after=lambda result: result.outcome is PublishOutcome.PUBLISHED
    ),
    TASK_RECORDED: Seam(TaskLife, "record", after=lambda _row: True),
}


def _wrap(point: str, seam: Seam, listener: Listener) -> Callable[..., Any]:
    original = getattr(seam.owner, seam.name)

    @functools.wraps(original)
    def reached(*args: Any, **kwargs: Any) -> Any:
        if seam.before is not None and seam.before(*args, **kwargs):
            listener(point)
        result = original(*args, **kwargs)
        if seam.after is not None and seam.after(result):
            listener(point)
        return result

    return reached


def install(listener: Listener) -> Callable[[], None]:
    """Call `listener(point)` at every point from now on, in this process; returns the undo."""
    originals = {point: getattr(seam.owner, seam.name) for point, seam in SEAMS.items()}
    for point, seam in SEAMS.items():
        setattr(seam.owner, seam.name, _wrap(point, seam, listener))

    def undo() -> None:
        for point, seam in SEAMS.items():
            setattr(seam.owner, seam.name, originals[point])

    return undo


@contextmanager
def installed(listener: Listener) -> Iterator[None]:
    undo = install(listener)
    try:
        yield
    finally:
        undo()


def killer(fault_file: Path) -> Listener:
    """SIGKILL this process at the point the file names (read at each point; none: go on)."""

    def reached(point: str) -> None:
        try:
            armed = fault_file.read_text().strip()
        except OSError:
            return
        if armed == point:
            log.error("fault point %s reached: this overlord kills itself (%s)", point, fault_file)
            logging.shutdown()
            os.kill(os.getpid(), signal.SIGKILL)

    return reached


def main(argv: list[str]) -> int:
    """`python -m supervisor.testkit.faults FILE <sluicegate arguments>`: the CLI, with the
    points armed by FILE."""
    from supervisor.cli import main as cli

    install(killer(Path(argv[0])))
    return cli(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
