"""A task that has stopped reading steps back on the CPU while it publishes.

At a rollover the group's successor starts reading the moment its predecessor pauses, usually
on the same machine, while the predecessor merges its persists into segments and publishes
them. The successor's first batches decide the lag at the rollover; the predecessor's merge
only decides how soon those segments are queryable, seconds later either way. So the
predecessor lowers its own scheduling priority (raises its nice value) for the rest of its
life: the Python driver, the Spark JVM it started and that JVM's Python workers. With idle
cores nothing changes; on a busy machine the reading task goes first.

Linux schedules by autogroup (one per session, when `kernel.sched_autogroup_enabled` is 1, the
default on most distributions): a thread's nice value then only counts against threads of its
own session, and sessions share the CPU by their autogroup's nice value. The runner starts every
task in a session of its own, so a task that leads its session also raises its autogroup's nice
value (/proc/self/autogroup), which is what moves it behind the other tasks.

Linux only (it walks /proc); elsewhere, or when the system refuses, nothing changes. Nice values
only go up without privileges, so this is one-way, which suits a task about to exit.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tasks.procfs import process_tree, threads

log = logging.getLogger(__name__)
PUBLISHING_NICENESS = 10  # added to the task's nice value (19 at most)


def _autogroup_nice(by: int) -> bool:
    """Raise the nice value of this session's autogroup, if this process leads the session (a
    task started from a shell would otherwise slow the shell's other processes too)."""
    path = Path("/proc/self/autogroup")
    if os.getsid(0) != os.getpid():
        return False
    try:
        nice = int(path.read_text().split()[-1])  # "/autogroup-42 nice 0"
        path.write_text(str(min(19, nice + by)))
    except (OSError, ValueError, IndexError):
        return False
    return True


def step_back(by: int = PUBLISHING_NICENESS) -> int:
    """Raise the nice value of every thread of this process and its descendants by `by`, and
    of the session's autogroup if this process leads it; return how many threads were changed.
    Threads started later inherit the new value."""
    if _autogroup_nice(by):
        log.info("autogroup nice value raised by %s", by)
    changed = 0
    for pid in process_tree(os.getpid()):
        for tid in threads(pid):
            try:
                nice = os.getpriority(os.PRIO_PROCESS, tid)
                os.setpriority(os.PRIO_PROCESS, tid, min(19, nice + by))
                changed += 1
            except OSError:  # the thread ended meanwhile, or the system refused
                continue
    return changed


__all__ = ["PUBLISHING_NICENESS", "process_tree", "step_back"]
