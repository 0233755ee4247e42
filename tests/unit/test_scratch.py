"""Spark's scratch folder per process (tasks/spark/scratch.py): its own, and those of dead
processes removed when the next one claims the place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.spark import scratch


def test_a_claim_removes_the_folders_of_dead_processes_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = tmp_path / f"{scratch.PREFIX}{dead.stdout.strip()}"
    (gone / "blockmgr-1").mkdir(parents=True)
    alive = tmp_path / f"{scratch.PREFIX}{os.getppid()}"
    alive.mkdir()
    other = tmp_path / "something-else"
    other.mkdir()
    mine = scratch.claim(tmp_path)
    assert mine == tmp_path / f"{scratch.PREFIX}{os.getpid()}" and mine.is_dir()
    assert os.environ["SPARK_LOCAL_DIRS"] == str(mine)
    assert not gone.exists() and alive.exists() and other.exists()
    assert scratch.java_options(mine) == f"-Djava.io.tmpdir={mine}"
    scratch.release(mine)
    assert not mine.exists()


def test_the_operators_spark_local_dirs_is_the_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "fast") + ",/elsewhere")
    mine = scratch.claim(tmp_path / "work")
    assert mine.parent == tmp_path / "fast"
    scratch.release(mine)
