"""tasks/runtime/priority.py on real processes: a child Python with a thread of its own and a child
of its own steps back; every one of them ends up nicer, and threads started afterwards too.
(The test process itself is never reniced: that is one-way.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tasks.runtime.priority import PUBLISHING_NICENESS, process_tree

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")

CHILD = textwrap.dedent(
    """
    import json, os, subprocess, sys, threading, time
    from tasks.runtime.priority import step_back

    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    parked = threading.Event()
    ids = {}
    def park():
        ids["thread"] = threading.get_native_id()
        parked.wait()
    thread = threading.Thread(target=park)
    thread.start()
    while "thread" not in ids or not os.path.exists(f"/proc/{grandchild.pid}/task"):
        time.sleep(0.01)
    time.sleep(0.2)  # the grandchild is running its own interpreter by now
    before = os.getpriority(os.PRIO_PROCESS, 0)
    changed = step_back()
    later = {}
    late = threading.Thread(target=lambda: later.update(n=os.getpriority(os.PRIO_PROCESS, 0)))
    late.start(); late.join()
    print(json.dumps({
        "autogroup": open("/proc/self/autogroup").read().split()[-1]
        if os.path.exists("/proc/self/autogroup") else None,
        "before": before,
        "changed": changed,
        "main": os.getpriority(os.PRIO_PROCESS, 0),
        "thread": os.getpriority(os.PRIO_PROCESS, ids["thread"]),
        "grandchild": os.getpriority(os.PRIO_PROCESS, grandchild.pid),
        "later_thread": later["n"],
    }))
    parked.set(); grandchild.kill()
    """
)


def test_step_back_renices_every_thread_of_the_process_tree() -> None:
    # a session of its own, as the runner starts tasks: its autogroup is its own too
    out = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        start_new_session=True,
    )
    seen = json.loads(out.stdout)
    expected = min(19, seen["before"] + PUBLISHING_NICENESS)
    assert seen["changed"] >= 3  # main thread, parked thread, grandchild's main thread
    assert seen["main"] == expected
    assert seen["thread"] == expected
    assert seen["grandchild"] == expected
    assert seen["later_thread"] == expected
    assert os.getpriority(os.PRIO_PROCESS, 0) == seen["before"]  # this process untouched
    if seen["autogroup"] is not None:  # kernels scheduling by session; a new one starts at 0
        assert int(seen["autogroup"]) == PUBLISHING_NICENESS


def test_process_tree_lists_the_process_then_its_descendants() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tree = process_tree(os.getpid())
        assert tree[0] == os.getpid()
        assert child.pid in tree
    finally:
        child.kill()
        child.wait()
