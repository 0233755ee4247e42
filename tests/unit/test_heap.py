"""supervisor.heap: what `serve` does to the garbage collector before serving."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from supervisor import heap, memmaps


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_settle_freezes_startup_objects_and_collects_the_young_less_often(
    restored_gc: None,
) -> None:
    built_at_startup = [{"n": n} for n in range(1000)]  # containers: tracked by the collector
    _, middle, old = gc.get_threshold()

    heap.settle(10_000)

    assert gc.get_freeze_count() >= len(built_at_startup)
    assert gc.get_threshold() == (10_000, middle, old)
    assert gc.get_count()[0] < 10_000  # a collection ran first: the young start empty


def test_the_service_setting_bounds_the_threshold() -> None:
    from pydantic import ValidationError

    from supervisor.settings import Settings

    assert Settings().gc_young_threshold == 10_000
    with pytest.raises(ValidationError):
        Settings(gc_young_threshold=0)  # 0 would switch the collector off


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


@pytest.mark.skipif(heap._glibc() is None, reason="malloc_trim is glibc's")
def test_free_memory_in_the_c_heap_goes_back_to_the_system_at_the_next_trim() -> None:
    import time

    # 600-byte blocks come from malloc (Python's own allocator takes 512 bytes at most); one
    # kept in a hundred pins the heap, so the freed rest stays resident until trimmed
    blocks = [bytes(600) + bytes([n % 256]) for n in range(200_000)]
    kept = blocks[::100]
    del blocks
    fragmented = _rss_mb()

    trimming = heap.native(0, 0.05)

    deadline = time.monotonic() + 10
    while _rss_mb() > fragmented - 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    trimming.set()
    assert _rss_mb() <= fragmented - 50  # of ~125 MB freed
    assert len(kept) == 2_000


def test_held_names_each_allocator(tmp_path: Path) -> None:
    import re
    import sqlite3

    report = heap.held()
    for part in ("python blocks", "arrow", "rss"):
        assert part in report
    if heap._sqlite() is None:
        return  # SQLite built into Python's module: its memory is not reachable, not named
    assert "sqlite" in report

    def sqlite_mib() -> float:
        found = re.search(r"sqlite ([0-9.]+) MiB", heap.held())
        assert found is not None
        return float(found.group(1))

    gc.collect()  # other tests' connections closed first
    db = sqlite3.connect(tmp_path / "cache.db")
    db.execute("PRAGMA cache_size=-4096")  # 4 MiB of page cache at most
    db.execute("CREATE TABLE t (v TEXT)")
    db.executemany("INSERT INTO t VALUES (?)", [("x" * 500,) for _ in range(6000)])
    db.commit()
    db.execute("SELECT COUNT(*) FROM t WHERE v LIKE '%y%'").fetchone()  # every page read
    open_mib = sqlite_mib()
    pages = re.search(r"page caches ([0-9.]+)", heap.held())
    assert pages is not None and 1.5 <= float(pages.group(1)) <= open_mib  # a part of it
    db.close()
    assert open_mib - sqlite_mib() >= 1.5  # the connection's page cache was in it, and went


def test_pooled_sqlite_connections_read_through_a_mapping_not_a_cache_each(
    tmp_path: Path,
) -> None:
    """Twenty connections of the service's pool that have each read a 4 MB table hold a
    fraction of what their page caches would (2 MiB each, 40 MiB in all)."""
    import threading

    from sqlalchemy import text

    from supervisor.db.engine import MMAP_BYTES, make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'meta.db'}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT)"))
        conn.execute(
            text("INSERT INTO rows (body) VALUES (:body)"),
            [{"body": "x" * 400} for _ in range(10_000)],
        )
    sqlite = heap._sqlite()
    assert sqlite is not None
    before = sqlite.sqlite3_memory_used()
    readers, held = threading.Barrier(20), []

    def read() -> None:
        with engine.connect() as conn:  # twenty at once: twenty connections of the pool
            assert conn.execute(text("PRAGMA mmap_size")).scalar() == MMAP_BYTES
            assert len(conn.execute(text("SELECT body FROM rows")).all()) == 10_000
            readers.wait(timeout=30)
            held.append(sqlite.sqlite3_memory_used())
            readers.wait(timeout=30)

    threads = [threading.Thread(target=read) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.dispose()
    assert len(held) == 20
    assert max(held) - before < 8 * 2**20


def test_held_names_each_named_cache_with_its_entries_and_weight() -> None:
    from supervisor.lru import Lru

    cache: Lru[str, bytes] = Lru(10, 2**30, name="test entries")
    unnamed: Lru[str, bytes] = Lru(10)
    for key in "abc":
        cache.put(key, b"x", weight=2**20)
        unnamed.put(key, b"x")
    assert "test entries 3 (3.0 MiB)" in heap.held()
    del cache
    gc.collect()
    assert "test entries" not in heap.held()  # a cache gone is not reported


def test_anonymous_memory_is_told_apart_by_the_shape_of_its_mapping(tmp_path: Path) -> None:
    import resource

    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    arena = memmaps.HEAP_ALIGN * 3
    maps = [
        ("55f27498f000-55f274ab6000 rw-p 00000000 00:00 0 [heap]", 1120),
        (f"{arena:x}-{arena + 135168:x} rw-p 00000000 00:00 0", 132),
        (f"{arena + 135168:x}-{arena + memmaps.HEAP_ALIGN:x} ---p 00000000 00:00 0", 0),
        (f"7f4a76fff000-{0x7F4A76FFF000 + stack:x} rw-p 00000000 00:00 0", 48),
        ("7f4a7ce3e000-7f4a7d13e000 rw-p 00000000 00:00 0", 2420),
        ("7f4a7d844000-7f4a7d978000 rw-p 0034f000 08:01 42 /usr/lib/libpython3.11.so", 1232),
    ]
    text = "".join(f"{head}\nRss: {kb} kB\nAnonymous: {kb} kB\nSwap: 0 kB\n" for head, kb in maps)
    (tmp_path / "smaps").write_text(text)

    found = memmaps.anonymous_by_kind(str(tmp_path / "smaps"))

    assert {k: v // 1024 for k, v in found.items()} == {
        "brk": 1120,
        "arenas": 132,
        "stacks": 48,
        "libraries": 1232,
        "other": 2420,
    }
    assert memmaps.anonymous_by_kind(str(tmp_path / "absent")) == {}
    assert "anonymous brk" in heap.held()  # this process's own, in the report


def test_pythons_arenas_are_read_from_a_forked_copy_and_count_what_is_allocated() -> None:
    before = memmaps.python_arenas()
    small = [{"n": n} for n in range(100_000)]  # ~20 MB of small blocks: Python's arenas

    after = memmaps.python_arenas()

    assert before and after
    assert after["arena_bytes"] >= after["allocated"] + after["available"]
    assert after["allocated"] - before["allocated"] >= 10 * 2**20
    assert after["highwater"] >= after["arenas"] > before["arenas"]
    assert "python arenas" in heap.held()
    assert len(small) == 100_000


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_garbage_not_yet_collected_is_counted_in_a_forked_copy_and_left_to_the_process() -> None:
    gc.disable()  # (no collection of this process's comes between the cycles and the count)
    try:
        gc.collect()
        kept = weakref.ref(_Cycle())  # unreachable at once, freed by a collection only
        for _ in range(5_000):
            _Cycle()

        found = memmaps.garbage()

        assert kept() is not None  # this process's garbage is its own still
    finally:
        gc.enable()
    assert found is not None
    assert found.objects >= 5_001
    assert found.kinds[0] == (f"{__name__}._Cycle", found.objects)
    assert found.blocks >= 5_001  # the objects' own blocks at least
    gc.collect()
    assert kept() is None
    assert "garbage" in heap.held()


_ALLOCATOR_PROBE = """
import os, subprocess, sys
from supervisor import allocator
print("before", os.getpid(), flush=True)
allocator.python_allocator(sys.argv[1])
sys._debugmallocstats()  # pymalloc's pools and arenas on stderr; nothing of them on malloc
child = subprocess.run(
    [sys.executable, "-c", "import os; print(os.environ.get('PYTHONMALLOC'))"],
    capture_output=True, text=True, check=True,
)
print("after", os.getpid(), os.environ.get("PYTHONMALLOC"), child.stdout.strip(), flush=True)
"""


def _run_allocator_probe(wanted: str, **environment: str) -> tuple[list[str], str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONMALLOC"}
    done = subprocess.run(
        [sys.executable, "-c", _ALLOCATOR_PROBE, wanted],
        env={**env, **environment},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    return done.stdout.splitlines(), done.stderr


def test_malloc_starts_the_process_again_on_it_with_its_pid_and_leaves_its_children_theirs() -> (
    None
):
    lines, stats = _run_allocator_probe("malloc")
    before, after = lines[0].split(), lines[-1].split()
    assert lines[0] == lines[1], "the process ran its start twice: once, then again on malloc"
    assert len(lines) == 3
    assert after[1] == before[1], "started again in place: the same PID"
    assert after[2:] == ["None", "None"], "the variable is the process's alone, not its children's"
    assert "Small block threshold" not in stats, "pymalloc still allocates"


def test_pymalloc_and_an_operators_pythonmalloc_are_kept_as_they_are() -> None:
    for wanted, environment, allocator in (
        ("pymalloc", {}, "None"),
        ("malloc", {"PYTHONMALLOC": "pymalloc"}, "pymalloc"),
    ):
        lines, stats = _run_allocator_probe(wanted, **environment)
        assert len(lines) == 2, lines
        assert lines[0].split()[1] == lines[1].split()[1]
        assert lines[1].split()[2:] == [allocator, allocator]
        assert "Small block threshold" in stats
