"""The allocation trace's report: each call path that grew, named by its allocating line and
the innermost of the project's own frames that led there."""

from __future__ import annotations

import json
import logging
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pydantic

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


class Holder:
    def __init__(self) -> None:
        self.cache: Lru[int, _Kept] = Lru(1000)


HOLDER = Holder()


def test_owners_name_the_chain_that_holds_objects_from_their_nearest_non_container() -> None:
    for key in range(30):
        HOLDER.cache.put(key, _Kept())
    found = heap.owners([f"{__name__}._Kept"], sample=20)
    (chains,) = found.values()
    assert sum(chains.values()) == 20  # each sampled object's chain is counted
    (chain,) = chains  # all of them by the same chain: the cache's entries, in an Lru
    assert chain.startswith("supervisor.lru.Lru._entries < collections.OrderedDict <")
    assert chain.endswith(f"< {__name__}._Kept")
    HOLDER.cache = Lru(1000)
    assert heap.owners([f"{__name__}._Kept"]) == {f"{__name__}._Kept": {}}


class _Metadata(pydantic.BaseModel):
    entries: list[Any]


def test_a_chain_goes_on_past_a_pydantic_model_to_what_holds_it() -> None:
    HOLDER.cache.put(0, _Metadata(entries=[_Kept() for _ in range(3)]))  # type: ignore[arg-type]
    (chains,) = heap.owners([f"{__name__}._Kept"]).values()
    (chain,) = chains
    assert chain.startswith("supervisor.lru.Lru._entries < collections.OrderedDict <")
    assert f"< {__name__}._Metadata <" in chain and chain.endswith(f"< {__name__}._Kept")
    HOLDER.cache = Lru(1000)


def test_work_in_a_fork_sees_the_objects_writes_its_finding_and_is_reaped(tmp_path: Path) -> None:
    for key in range(5):
        HOLDER.cache.put(key, _Kept())
    out = tmp_path / "owners.json"

    def work() -> None:
        found = heap.owners([f"{__name__}._Kept"])
        partial = out.with_suffix(".part")
        partial.write_text(json.dumps({kind: dict(chains) for kind, chains in found.items()}))
        partial.rename(out)

    reaper = heap._in_a_fork(work)
    reaper.join(30)  # the copy ended and was waited for: no zombie left behind
    assert not reaper.is_alive()
    (chains,) = json.loads(out.read_text()).values()
    assert sum(chains.values()) == 5
    HOLDER.cache = Lru(1000)


def test_every_nth_report_logs_what_holds_the_types_grown_most(tmp_path: Path) -> None:
    log = tmp_path / "memory.log"
    handler = logging.FileHandler(log)
    logger = logging.getLogger("supervisor.heap")
    logger.addHandler(handler)
    # a type named to it is followed too, grown or not (Lru itself does not grow here)
    stop = heap.report_every(0.2, top=5, owners_every=2, owners_of=["supervisor.lru.Lru"])
    try:
        for key in range(10):  # objects that grow in number after the first report
            for each in range(100):
                HOLDER.cache.put(key * 100 + each, _Kept())
            time.sleep(0.1)
        deadline = time.monotonic() + 30
        while "held " not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        stop.set()
        logger.removeHandler(handler)
        HOLDER.cache = Lru(1000)
    text = log.read_text()
    assert "memory: " in text and "objects grown most: " in text
    assert f"held {__name__}._Kept by: " in text
    assert "supervisor.lru.Lru._entries < collections.OrderedDict <" in text
    assert "held supervisor.lru.Lru by: " in text
