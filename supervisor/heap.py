"""The service's garbage collector: freeze what startup built, collect the young rarely.

A full collection walks every tracked object while holding the GIL, so it stalls every
request and every pass at once. On this project's reference machine it costs ~0.3 µs an
object: 35 ms for the ~115k objects the imports alone leave (modules, functions, types),
100-145 ms with 1,000 supervisors' loops, every few seconds under load
(bench/control_plane.py; that stall was most of the REST p99). Startup's objects live as
long as the process, so they are moved out of the collector's sight (`gc.freeze`), and the
youngest generation is collected every `young` net allocations instead of Python's 700, so
the older generations (and the full collections they lead to) come ~15 times less often.

Memory outside Python's allocator: glibc's malloc gives each thread that finds the others'
arenas busy an arena of its own (up to eight per core), and keeps what is freed inside an
arena's heap for reuse rather than giving it back. An overlord's threads (request handlers,
passes, duties, librdkafka's and SQLite's buffers, Arrow reading footers) leave each arena
fragmented, and its resident memory creeps up for hours. `native` limits the arenas and gives
the free pages back to the system every so often (`malloc_trim`); on a C library other than
glibc both are no-ops.

Python's own allocator: supervisor/allocator.py.
"""

from __future__ import annotations

import collections
import functools
import gc
import inspect
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pydantic

from supervisor.memmaps import anonymous_by_kind, garbage, in_a_fork, python_arenas

_ROOT = str(Path(__file__).resolve().parent.parent) + "/"
_PROJECT = tuple(_ROOT + part + "/" for part in ("supervisor", "tasks"))


def settle(young: int) -> None:
    """Collect once, freeze every surviving object, then collect the youngest generation every
    `young` net allocations. Call once, after startup's imports, before serving."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)


M_ARENA_MAX = -8  # glibc's mallopt parameter


def native(arenas: int, trim_every_s: float) -> threading.Event:
    """At most `arenas` malloc arenas (0: glibc's own limit), and every `trim_every_s` (0:
    never) the free pages of every arena given back, until the returned event is set. Call
    first thing, before the process starts threads: arenas made before it stay."""
    stop = threading.Event()
    libc = _glibc()
    if libc is None:
        return stop
    if arenas and not libc.mallopt(M_ARENA_MAX, arenas):
        logging.getLogger("supervisor.heap").warning("malloc arenas not limited to %d", arenas)
    if trim_every_s:

        def trim() -> None:
            while not stop.wait(trim_every_s):
                libc.malloc_trim(0)

        threading.Thread(target=trim, name="malloc-trim", daemon=True).start()
    return stop


def report_every(
    every_s: float, top: int = 8, owners_every: int = 0, owners_of: Sequence[str] = ()
) -> threading.Event:
    """Diagnostics: log the process's memory by where it is held (`held`) every `every_s`,
    and the `top` types whose live objects grew most in number since the first report (the
    objects the collector tracks, less those `settle` froze; counting them walks them all,
    ~0.3 s for a million, which is why this is not on by default); every `owners_every`th
    report (0: never), what holds those types' objects (`log_owners`, in a forked copy of the
    process), and of the types named in `owners_of`. Set the event returned to stop."""
    log = logging.getLogger("supervisor.heap")
    stop = threading.Event()

    def report() -> None:
        first: dict[str, int] | None = None
        reports = 0
        while not stop.wait(every_s):
            counts = type_counts()
            first = counts if first is None else first
            log.warning(
                "memory: %s; objects grown most: %s", held(), grown_types(first, counts, top)
            )
            reports += 1
            if owners_every and reports % owners_every == 0:
                kinds = [name for name, _ in _grown(first, counts, top)]
                kinds += [name for name in owners_of if name not in kinds]
                _in_a_fork(functools.partial(log_owners, kinds)).join()

    threading.Thread(target=report, name="memory-report", daemon=True).start()
    return stop


def type_counts() -> dict[str, int]:
    """How many objects of each type the collector tracks (frozen ones aside), by the type's
    module and name."""
    counts: dict[str, int] = {}
    for item in gc.get_objects():
        name = _name(type(item))
        counts[name] = counts.get(name, 0) + 1
    return counts


def _grown(first: dict[str, int], now: dict[str, int], top: int) -> list[tuple[str, int]]:
    """The `top` types whose count grew most from `first` to `now` (those that grew), with
    their growth."""
    grown = sorted(
        ((count - first.get(name, 0), name) for name, count in now.items()), reverse=True
    )[:top]
    return [(name, delta) for delta, name in grown if delta > 0]


def grown_types(first: dict[str, int], now: dict[str, int], top: int) -> str:
    """The `top` types whose count grew most from `first` to `now`, as `name +n (now)`."""
    grown = _grown(first, now, top)
    return ", ".join(f"{name} {delta:+d} ({now[name]})" for name, delta in grown) or "none"


def _in_a_fork(work: Callable[[], None]) -> threading.Thread:
    """Run `work` in a forked copy of the process (`memmaps.in_a_fork`), and reap it: the
    thread returned waits for the copy."""
    pid = in_a_fork(work)
    reaper = threading.Thread(target=os.waitpid, args=(pid, 0), name="owners-reap", daemon=True)
    reaper.start()
    return reaper


_CONTAINERS = (dict, list, tuple, set, frozenset, collections.OrderedDict, collections.deque)
_PASSED = (*_CONTAINERS, pydantic.BaseModel)


def _passed_through(holder: Any) -> bool:
    """Whether a chain of holders goes on past `holder`: a container, or a pydantic model
    (pyiceberg's metadata is made of them: the chain of a table's snapshot log entry ends at
    whatever holds the table's metadata, not at the metadata)."""
    return isinstance(holder, _PASSED)


def owners(kinds: list[str], sample: int = 200, depth: int = 12) -> dict[str, Counter[str]]:
    """For each type in `kinds` (by module and name), what holds up to `sample` of its
    objects: the shortest chain of referrers from a module or class, or from an object of
    another type (each container's key or index on the way), counted by chain. Walks every
    object the collector tracks, frozen ones too (so it unfreezes them), after a full
    collection (garbage is held by nothing live, however it holds itself): for a forked copy."""
    gc.unfreeze()
    gc.collect()
    everything = gc.get_objects()
    held_by: dict[int, list[Any]] = {}
    for holder in everything:
        for held in gc.get_referents(holder):
            held_by.setdefault(id(held), []).append(holder)
    found: dict[str, Counter[str]] = {}
    for kind in kinds:
        chains: Counter[str] = Counter()
        items = [item for item in everything if _name(type(item)) == kind][-sample:]
        for item in items:
            chains[_chain(item, held_by, depth)] += 1
        found[kind] = chains
    return found


def _chain(item: Any, held_by: dict[int, list[Any]], depth: int) -> str:
    """The shortest chain of holders of `item` up to one that is no container (breadth first,
    at most `depth` steps), as `holder.attribute < container < ... < item's type`."""
    # each step of the frontier: the object, what it holds on the way down, the chain's text
    frontier: list[tuple[Any, Any, str]] = [(item, None, _name(type(item)))]
    seen = {id(item)}
    for _ in range(depth):
        following = []
        for current, below, text in frontier:
            for holder in held_by.get(id(current), ()):
                if id(holder) in seen or inspect.isframe(holder):
                    continue
                seen.add(id(holder))
                if not _passed_through(holder):
                    return f"{_name(type(holder))}{_attribute(holder, current, below)} < {text}"
                following.append((holder, current, f"{_name(type(holder))} < {text}"))
        if not following:
            return f"(held by nothing tracked) {frontier[0][2]}"
        frontier = following
    return f"(deeper than {depth}) {frontier[0][2]}"


def _attribute(holder: Any, held: Any, below: Any) -> str:
    """The attribute of `holder` that is `held` (or that `held`, its `__dict__`, keeps
    `below` under), as `.name`; nothing when none is."""
    try:
        attributes = vars(holder)
    except TypeError:
        return ""
    wanted = below if attributes is held else held
    name = next((key for key, value in attributes.items() if value is wanted), None)
    return f".{name}" if isinstance(name, str) else ""


def _name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def log_owners(kinds: list[str]) -> None:
    """Log what holds objects of `kinds` (`owners`), by the chains most objects share."""
    log = logging.getLogger("supervisor.heap")
    for kind, chains in owners(kinds).items():
        shown = "; ".join(f"{n}x {chain}" for chain, n in chains.most_common(4))
        log.warning("held %s by: %s", kind, shown or "nothing")


@functools.cache
def _glibc() -> Any:
    """glibc's C library, or None on another (musl has no mallopt arenas nor malloc_trim)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it)
    except (OSError, AttributeError):
        return None
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2]

    libc.mallinfo2.restype = MallInfo2
    return libc


def trace_allocations(every_s: float, top: int = 15, frames: int = 25) -> None:
    """Diagnostics for a process whose memory grows: trace allocations (Python's tracemalloc,
    `frames` deep, which costs CPU and memory of its own) and every `every_s` log where the
    memory held grew most since the first of those looks (what startup and the first `every_s`
    built is not growth), by call path (`grown_most`). Started by `serve` when
    SLUICEGATE_TRACE_ALLOCATIONS_S is set; off by default."""
    import time
    import tracemalloc

    log = logging.getLogger("supervisor.heap")
    tracemalloc.start(frames)

    def watch() -> None:
        time.sleep(every_s)
        first = tracemalloc.take_snapshot()
        while True:
            time.sleep(every_s)
            snapshot = tracemalloc.take_snapshot()
            total = sum(stat.size for stat in snapshot.statistics("filename")) / 2**20
            log.warning(
                "allocations held: %.1f MiB; memory: %s; grown most:\n  %s",
                total,
                held(),
                "\n  ".join(grown_most(first, snapshot, top)),
            )

    threading.Thread(target=watch, name="trace-allocations", daemon=True).start()


def grown_most(first: Any, now: Any, top: int) -> list[str]:
    """The `top` places whose memory held grew most from snapshot `first` to `now`, a line
    each: the growth, the allocating line, and the innermost of this project's own frames that
    led to it (where a library's allocation is kept alive is almost always there). Call paths
    that differ only outside those two are summed into one place."""
    grown: dict[str, int] = {}
    for stat in now.compare_to(first, "traceback"):
        frames = list(stat.traceback)  # the oldest call first
        if not frames:
            continue
        where = frames[-1]
        mine = next((f for f in reversed(frames) if f.filename.startswith(_PROJECT)), None)
        via = ""
        if mine is not None and mine is not where:
            via = f" via {mine.filename[len(_ROOT) :]}:{mine.lineno}"
        place = f"{where}{via}"
        grown[place] = grown.get(place, 0) + stat.size_diff
    ranked = sorted(grown.items(), key=lambda item: item[1], reverse=True)[:top]
    return [f"{size / 2**10:+.0f} KiB {place}" for place, size in ranked]


def held() -> str:
    """The process's memory by where it is held, for the diagnostics: the C allocator's bytes
    in use and free within its heaps (glibc's mallinfo2), Python's allocated blocks, Arrow's
    pool, SQLite's own (every connection's page cache, up to 2 MiB each, is in it), the
    project's named caches (entries, and their weight where they are weighed), the resident
    set and threads."""
    import sys

    import pyarrow

    parts = []
    libc = _glibc()
    if libc is not None:
        info = _mallinfo2(libc)
        parts.append(f"malloc in use {info[0] / 2**20:.1f} MiB, free {info[1] / 2**20:.1f} MiB")
        parts.append(f"mmapped {info[2] / 2**20:.1f} MiB")
    parts.append(f"python blocks {sys.getallocatedblocks()}")
    arenas = python_arenas()
    if arenas:
        parts.append(
            f"python arenas {arenas['arenas']} ({arenas['arena_bytes'] / 2**20:.1f} MiB: blocks"
            f" {arenas['allocated'] / 2**20:.1f}, free in pools {arenas['available'] / 2**20:.1f},"
            f" unused pools {arenas['unused_pools'] / 2**20:.1f}; highwater {arenas['highwater']})"
        )
    found = garbage()
    if found is not None:
        most = ", ".join(f"{name} {n}" for name, n in found.kinds) or "none"
        parts.append(f"garbage {found.objects} objects, {found.blocks} blocks (most: {most})")
    pool = pyarrow.default_memory_pool()
    parts.append(f"arrow {pool.backend_name} {pyarrow.total_allocated_bytes() / 2**20:.1f} MiB")
    sqlite = _sqlite()
    if sqlite is not None:
        used, highest = sqlite.sqlite3_memory_used(), sqlite.sqlite3_memory_highwater(0)
        pages = _sqlite_status(sqlite, _PAGECACHE_OVERFLOW)
        parts.append(
            f"sqlite {used / 2**20:.1f} MiB (at most {highest / 2**20:.1f}; page caches"
            f" {pages / 2**20:.1f}, the rest its statements and schemas)"
        )
    from supervisor.lru import named

    caches = [f"{name} {n} ({weight / 2**20:.1f} MiB)" for name, n, weight in named() if n]
    if caches:
        parts.append("caches: " + ", ".join(caches))
    kinds = anonymous_by_kind()
    if kinds:
        parts.append("anonymous " + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in kinds.items()))
    with open("/proc/self/status") as status:
        rss = next((line.split()[1] for line in status if line.startswith("VmRSS")), "0")
    parts.append(f"rss {int(rss) / 1024:.0f} MiB, {threading.active_count()} threads")
    return "; ".join(parts)


@functools.cache
def _sqlite() -> Any:
    """The SQLite library Python's sqlite3 module runs on (None when it cannot be reached)."""
    import ctypes

    try:
        import _sqlite3

        library = ctypes.CDLL(_sqlite3.__file__)
        library.sqlite3_memory_used.restype = ctypes.c_int64
        library.sqlite3_memory_highwater.restype = ctypes.c_int64
        library.sqlite3_memory_highwater.argtypes = [ctypes.c_int]
        library.sqlite3_status64.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 2 + [ctypes.c_int]
    except (ImportError, OSError, AttributeError):
        return None
    return library


_PAGECACHE_OVERFLOW = 2  # SQLITE_STATUS_PAGECACHE_OVERFLOW: page caches' bytes from malloc


def _sqlite_status(library: Any, op: int) -> int:
    """One of sqlite3_status64's current values (every page cache's bytes, for one)."""
    import ctypes

    current, highest = ctypes.c_int64(), ctypes.c_int64()
    library.sqlite3_status64(op, ctypes.byref(current), ctypes.byref(highest), 0)
    return current.value


_MALLINFO2 = [
    "arena",
    "ordblks",
    "smblks",
    "hblks",
    "hblkhd",
    "usmblks",
    "fsmblks",
    "uordblks",
    "fordblks",
    "keepcost",
]


def _mallinfo2(libc: Any) -> tuple[int, int, int]:
    """glibc's (bytes in use, free bytes in its heaps, bytes in mmapped chunks)."""
    info = libc.mallinfo2()
    return info.uordblks, info.fordblks, info.hblkhd
