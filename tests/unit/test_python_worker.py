"""tasks/reading/python_worker.py: a worker's per-task importlib.invalidate_caches() reads a zip
archive's directory again only when the archive changed, and its per-task full collection
walks only what was made since the batches' modules were loaded."""

from __future__ import annotations

import importlib
import subprocess
import sys
import zipfile
import zipimport
from pathlib import Path
from typing import Any

import pytest

from tasks.reading import python_worker


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="zipimporter invalidation is lazy there")
def test_an_unchanged_archive_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("sg_zipped_a.py", "VALUE = 1\n")
    monkeypatch.syspath_prepend(str(archive))
    # settle() patches the class for the process: put it back after the test
    monkeypatch.setattr(
        zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches
    )
    monkeypatch.setattr(zipimport.zipimporter, "_sluicegate", False, raising=False)
    monkeypatch.setattr(python_worker, "_read_at", {})
    monkeypatch.setattr(python_worker, "_frozen", True)  # this process's heap is left alone
    reads: list[str] = []
    read_directory = zipimport._read_directory  # type: ignore[attr-defined]

    def counted(path: Any) -> Any:
        reads.append(str(path))
        return read_directory(path)

    monkeypatch.setattr(zipimport, "_read_directory", counted)
    assert importlib.import_module("sg_zipped_a").VALUE == 1
    importlib.invalidate_caches()
    assert str(archive) in reads  # as Python 3.11 does on its own

    python_worker.settle()
    importlib.invalidate_caches()  # the first after settle() notes the archive's state
    reads.clear()
    for _ in range(3):
        importlib.invalidate_caches()
    assert reads == []

    with zipfile.ZipFile(archive, "a") as zipped:
        zipped.writestr("sg_zipped_b.py", "VALUE = 2\n")
    importlib.invalidate_caches()
    assert str(archive) in reads
    assert importlib.import_module("sg_zipped_b").VALUE == 2
    for name in ("sg_zipped_a", "sg_zipped_b"):
        sys.modules.pop(name, None)


FROZEN = """
import gc, sys
from tasks.reading import python_worker
before = len(gc.get_objects())
python_worker.settle()
missing = [name for name in python_worker.MODULES if name not in sys.modules]
python_worker.settle()  # a second task's call: nothing more is frozen
print(before, gc.get_freeze_count(), len(gc.get_objects()), missing)
"""


def test_a_worker_freezes_the_loaded_modules_out_of_its_collections() -> None:
    # in a process of its own, as a Python worker: a frozen heap stays frozen
    out = subprocess.run(
        [sys.executable, "-c", FROZEN], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split(maxsplit=3)
    before, frozen, tracked, missing = int(out[0]), int(out[1]), int(out[2]), out[3].strip()
    assert missing == "[]"  # every module of the batches loaded
    # what a collection walks now is a small part of what the loaded modules made
    assert frozen > 2 * before
    assert tracked * 20 < frozen
