"""tasks/python_worker.py: a worker's per-task importlib.invalidate_caches() reads a zip
archive's directory again only when the archive changed."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from pathlib import Path
from typing import Any

import pytest

from tasks import python_worker


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
