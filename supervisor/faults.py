"""Fault points for the failover scenarios (tests/e2e/test_failover.py, bench/failover.py):
an overlord started with SLUICEGATE_FAULT_FILE reads that file whenever it reaches a named
point of a rollover, a task's launch or a publish, and SIGKILLs itself there when the file
names that point.
The file is the test's to write, so it can choose which overlord dies where while both run.
Without the variable (any real deployment) a point costs one dictionary lookup."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

log = logging.getLogger(__name__)
FAULT_FILE_ENV = "SLUICEGATE_FAULT_FILE"

ROLLOVER_PAUSED = "rollover.paused"  # every replica paused, no end offsets set yet
ROLLOVER_ENDS_SET = "rollover.ends-set"  # end offsets set on the tasks, not yet recorded
PUBLISH_COMMITTED = "publish.committed"  # a publish committed, its answer not yet sent
TASK_RECORDED = "task.recorded"  # a task recorded in the metadata DB, not yet started


def point(name: str) -> None:
    path = os.environ.get(FAULT_FILE_ENV)
    if not path:
        return
    try:
        armed = Path(path).read_text().strip()
    except OSError:
        return
    if armed == name:
        log.error("fault point %s reached: this overlord kills itself (%s)", name, path)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)
