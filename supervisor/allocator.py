"""`serve`'s allocator of Python's objects.

Python's own allocator (pymalloc) takes 1 MiB arenas for its small objects and gives one back
only when every object in it is freed. A burst of work (a host's tasks adopted, a sweep of
many tables' metadata) scatters long-lived objects over new arenas, so the overlord's floor
rose with each burst and never came back: in a 40-minute soak its arenas went from 100 to
113 MiB while the blocks in use stayed at 101-106 MiB. With glibc's malloc for every object
(`python_allocator`), trimmed by `heap.native`, that ratchet is gone: in an 80-minute soak
the overlord's second half sloped -1.5 MB/h, against +8.5 MB/h on pymalloc.
"""

from __future__ import annotations

import os
import sys

_ALLOCATOR_SET = "SLUICEGATE_PYTHON_ALLOCATOR_SET"  # marks the process `python_allocator` started


def python_allocator(wanted: str) -> None:
    """Run on `wanted` ("malloc" or "pymalloc"), Python's allocator of its objects, which it
    chooses once, as it starts (PYTHONMALLOC): for malloc, start this process again (the same
    PID and arguments) with PYTHONMALLOC=malloc. Call first thing, before any thread starts.
    PYTHONMALLOC set by the operator is theirs and is kept. What this sets is this process's
    alone: the next one removes it from its environment, so what it starts chooses its own."""
    if os.environ.pop(_ALLOCATOR_SET, None) is not None:
        os.environ.pop("PYTHONMALLOC", None)
        return
    if wanted == "pymalloc" or "PYTHONMALLOC" in os.environ or not sys.executable:
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    environment = {**os.environ, "PYTHONMALLOC": wanted, _ALLOCATOR_SET: "1"}
    os.execve(sys.executable, sys.orig_argv, environment)
