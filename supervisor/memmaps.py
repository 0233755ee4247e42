"""What the memory report reads of the process's mappings and of Python's allocator: the
anonymous memory by the kind of mapping holding it, Python's arenas, and the garbage the
collector has yet to find (the last two in a forked copy of the process)."""

from __future__ import annotations

import gc
import json
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

_ARENA_FIGURES = {
    "# arenas allocated current": "arenas",
    "# arenas highwater mark": "highwater",
    "# bytes in allocated blocks": "allocated",
    "# bytes in available blocks": "available",
}


def in_a_fork(work: Callable[[], None], stderr: int | None = None) -> int:
    """Run `work` in a forked copy of the process (with `stderr`, a file descriptor, as its
    stderr) and return the copy's pid, for the caller to reap: the copy has the objects as
    they were and no other thread, so a walk of them all holds no lock of this process (its
    GIL is held for the fork alone, ~10 ms a few hundred MB). Nothing of the process's own
    (its atexit, its buffers) runs in the copy."""
    pid = os.fork()
    if pid == 0:
        try:
            if stderr is not None:
                os.dup2(stderr, 2)
            work()
        finally:
            os._exit(0)
    return pid


def _from_a_fork(work: Callable[[], None]) -> str:
    """What `work`, run in a forked copy, writes to its stderr ("" where there is no pipe)."""
    try:
        read, write = os.pipe()
    except OSError:
        return ""
    try:
        pid = in_a_fork(work, stderr=write)
    finally:
        os.close(write)
    with os.fdopen(read, errors="replace") as written:
        text = written.read()
    os.waitpid(pid, 0)
    return text


def python_arenas() -> dict[str, int]:
    """Python's own allocator's figures (`sys._debugmallocstats`, which writes to C's stderr,
    read in a forked copy of the process so that this one's stderr is untouched): its arenas
    now and at most, their bytes, and of those the bytes in blocks in use, in free blocks of
    pools in use, and in pools unused (an arena is given back only once all its pools are).
    Empty where it cannot be read."""
    found: dict[str, int] = {}
    for line in _from_a_fork(sys._debugmallocstats).splitlines():
        name, _, value = line.partition("=")
        name, value = name.strip(), value.strip().replace(",", "")
        if not value.isdigit():
            continue
        if name in _ARENA_FIGURES:
            found[_ARENA_FIGURES[name]] = int(value)
        elif "bytes/arena" in name:
            found["arena_bytes"] = int(value)
        elif "unused pools" in name:
            found["unused_pools"] = int(value)
    found.setdefault("unused_pools", 0)
    keys = ("arenas", "highwater", "allocated", "available", "arena_bytes")
    return found if all(k in found for k in keys) else {}


@dataclass(frozen=True)
class Garbage:
    """What a full collection would find: objects no longer reachable (cycles) that the
    collector has not come to yet, the blocks of Python's allocator freeing them frees, and
    the types most of them are."""

    objects: int
    blocks: int
    kinds: list[tuple[str, int]]


def garbage(top: int = 4) -> Garbage | None:
    """The garbage the collector has yet to find (`Garbage`), by a full collection in a forked
    copy of the process (the process's own collections, the older generations' rare by
    `heap.settle`, are untouched: so is the resident memory the copy's walk makes its own).
    None where it cannot be read."""

    def collect() -> None:
        gc.set_debug(gc.DEBUG_SAVEALL)  # the unreachable, kept in gc.garbage to be counted
        objects = gc.collect()
        kinds = Counter(f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage)
        gc.set_debug(0)
        gc.garbage.clear()
        blocks = sys.getallocatedblocks()
        gc.collect()  # now they are freed
        found = {"objects": objects, "blocks": blocks - sys.getallocatedblocks()}
        os.write(2, json.dumps({**found, "kinds": kinds.most_common(top)}).encode())

    try:
        found = json.loads(_from_a_fork(collect))
    except ValueError:
        return None
    kinds = [(str(name), int(n)) for name, n in found["kinds"]]
    return Garbage(int(found["objects"]), int(found["blocks"]), kinds)


HEAP_ALIGN = 64 * 2**20  # glibc's threads' arenas are heaps aligned to their maximum size


def anonymous_by_kind(smaps: str = "/proc/self/smaps") -> dict[str, int]:
    """The process's anonymous resident bytes by the kind of mapping holding them, told apart
    by their shape: `brk` (malloc's main arena), `arenas` (its other arenas' heaps, which
    start on a 64 MiB boundary), `stacks` (threads' stacks, as large as RLIMIT_STACK, which
    glibc keeps cached for new threads once theirs have ended), `libraries` (written pages
    of mapped files), and `other` (Python's own arenas, Arrow's mimalloc, large blocks malloc
    mapped alone). A diagnostic: the kernel merges neighbouring mappings, so a stack beside
    another mapping counts as `other`. Empty where /proc is not Linux's."""
    import resource

    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    found = dict.fromkeys(("brk", "arenas", "stacks", "libraries", "other"), 0)
    kind = "other"
    try:
        with open(smaps) as maps:
            for line in maps:
                head = line.split(maxsplit=5)
                if head[0].endswith(":"):
                    if head[0] == "Anonymous:":
                        found[kind] += int(head[1]) * 1024
                    continue
                start, end = (int(x, 16) for x in head[0].split("-"))
                path = head[5].strip() if len(head) > 5 else ""
                if path == "[heap]":
                    kind = "brk"
                elif path and not path.startswith("["):
                    kind = "libraries"
                elif start % HEAP_ALIGN == 0 and head[1].startswith("rw"):
                    kind = "arenas"
                elif end - start == stack:
                    kind = "stacks"
                else:
                    kind = "other"
    except (OSError, ValueError, IndexError):
        return {}
    return found
