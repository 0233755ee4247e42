"""A dev-stack service that does not come up is not left running (devstack/service.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from supervisor.devstack import DevstackError
from supervisor.devstack.service import LocalService
from supervisor.net import free_port


def test_a_service_that_never_serves_is_stopped_before_its_error(tmp_path: Path) -> None:
    # listens nowhere: it never answers /status/health
    command = [sys.executable, "-c", "import time; time.sleep(120)"]
    url = f"http://127.0.0.1:{free_port()}"
    service = LocalService(command, url, tmp_path / "service.log", tmp_path)
    with pytest.raises(DevstackError, match=r"did not come up; see .*service\.log"):
        service.start(timeout=1.0)
    assert service.process is None  # stopped, and forgotten
    assert _children_running() == []


def _children_running() -> list[int]:
    """This test process's children that are still running (zombies aside)."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry.name))
    return found
