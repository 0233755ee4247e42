"""The allocation trace's report: each call path that grew, named by its allocating line and
the innermost of the project's own frames that led there."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

from supervisor import heap
from supervisor.cli.common import read_json_file
from supervisor.lru import Lru


def test_the_biggest_growth_comes_first_with_its_size_and_line() -> None:
    cache: Lru[int, bytes] = Lru(1000)
    tracemalloc.start(25)
    try:
        first = tracemalloc.take_snapshot()
        for key in range(200):
            cache.put(key, bytes(4096) + bytes([key % 256]))  # held by the cache: it grew
        now = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    lines = heap.grown_most(first, now, 3)
    assert len(lines) == 3
    top = lines[0]
    assert top.startswith("+") and " KiB " in top
    size_kib = float(top.split(" KiB ")[0])
    assert size_kib >= 200 * 4096 / 1024 * 0.9  # the 200 values of ~4 KiB
    # the allocation is this test's own line (tests are not the project's code, so no "via")
    assert "test_heap_trace.py" in top and " via " not in top


def test_a_library_allocation_names_the_project_frame_that_called_it(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({f"field{i}": "x" * 64 for i in range(500)}))
    tracemalloc.start(25)
    try:
        first = tracemalloc.take_snapshot()
        direct = [json.loads(spec.read_text()) for _ in range(5)]  # json's, from this test
        through = [read_json_file(str(spec)) for _ in range(20)]  # json's, from the CLI's
        now = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    assert direct and through
    lines = [line for line in heap.grown_most(first, now, 10) if "json/decoder.py" in line]
    via = [line for line in lines if " via supervisor/cli/common.py:" in line]
    assert len(via) == 1 and lines[0] == via[0]  # the bigger growth, and named where it came
    assert any(" via " not in line for line in lines[1:])  # the test's own: no project frame


class _Kept:
    pass


def test_the_types_whose_objects_grew_most_are_named_with_their_counts() -> None:
    first = heap.type_counts()
    kept = [_Kept() for _ in range(3000)]  # a type that grew by 3000
    now = heap.type_counts()
    name = f"{__name__}._Kept"
    assert now[name] - first.get(name, 0) == 3000
    report = heap.grown_types(first, now, 3)
    assert f"{name} +3000 ({now[name]})" in report.split(", ")
    assert heap.grown_types(now, now, 3) == "none"
    assert kept
