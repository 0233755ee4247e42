"""A dev-stack service that does not come up is not left running (devstack/service.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from supervisor.devstack import DevstackError
from supervisor.devstack.service import LocalService
from supervisor.net import free_port


def test_a_service_that_never_serves_is_stopped_before_its_error(tmp_path: Path) -> None:
    # listens nowhere: it never answers /status/health
    command = [sys.executable, "-c", "import time; time.sleep(120)"]
    url = f"http://127.0.0.1:{free_port()}"
    service = LocalService(command, url, tmp_path / "service.log", tmp_path)
    spawned: list[subprocess.Popen[bytes]] = []
    spawn = service._spawn

    def recorded(*args: Any) -> subprocess.Popen[bytes]:
        spawned.append(spawn(*args))
        return spawned[-1]

    service._spawn = recorded  # type: ignore[method-assign]
    with pytest.raises(DevstackError, match=r"did not come up; see .*service\.log"):
        service.start(timeout=1.0)
    assert service.process is None  # stopped, and forgotten
    [process] = spawned
    assert process.poll() is not None  # ended (and reaped)
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # nothing of its group is left
