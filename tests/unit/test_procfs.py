"""tasks/procfs.py on this machine's own processes: a child started here is found by its
parent, its tree, its ancestors and its command line, and is no longer running once it is a
zombie; a command name with spaces and parentheses does not shift the fields."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tasks import procfs


def test_a_child_is_found_every_way_and_stops_running_as_a_zombie(tmp_path: Path) -> None:
    # a command name ("comm") with a space and parentheses, as any program may have
    program = tmp_path / "odd) name (x"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", program)
    child = subprocess.Popen([str(program), "30"])
    try:
        assert procfs.parent(child.pid) == os.getpid()
        assert procfs.stat_fields(child.pid)[procfs.STATE] in ("S", "R")
        assert int(procfs.stat_fields(child.pid)[procfs.SESSION]) == os.getsid(0)
        assert procfs.running(child.pid)
        assert child.pid in procfs.children(os.getpid())
        tree = procfs.process_tree(os.getpid())
        assert tree[0] == os.getpid() and child.pid in tree
        assert procfs.ancestors(child.pid) >= {child.pid, os.getpid(), os.getppid()}
        assert procfs.with_marker(str(program).encode()) == [child.pid]
        assert procfs.with_marker(str(program).encode(), besides=child.pid) == []
        assert procfs.threads(child.pid) == [child.pid]
    finally:
        child.send_signal(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while procfs.stat_fields(child.pid)[procfs.STATE] != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not procfs.running(child.pid)  # a zombie until it is waited for
    child.wait()
    assert not procfs.running(child.pid)
    assert procfs.parent(child.pid) is None
    assert procfs.threads(child.pid) == []
    assert procfs.children(child.pid) == []
