"""What the memory report reads of the process's mappings and of Python's allocator: the
anonymous memory by the kind of mapping holding it, and Python's arenas."""

from __future__ import annotations

import os

_ARENA_FIGURES = {
    "# arenas allocated current": "arenas",
    "# arenas highwater mark": "highwater",
    "# bytes in allocated blocks": "allocated",
    "# bytes in available blocks": "available",
}


def python_arenas() -> dict[str, int]:
    """Python's own allocator's figures (`sys._debugmallocstats`, which writes to C's stderr,
    read in a forked copy of the process so that this one's stderr is untouched): its arenas
    now and at most, their bytes, and of those the bytes in blocks in use, in free blocks of
    pools in use, and in pools unused (an arena is given back only once all its pools are).
    Empty where it cannot be read."""
    import sys

    try:
        read, write = os.pipe()
    except OSError:
        return {}
    pid = os.fork()
    if pid == 0:  # the copy: its stderr is the pipe; nothing of the process's own runs
        try:
            os.close(read)
            os.dup2(write, 2)
            sys._debugmallocstats()
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, errors="replace") as stats:
        text = stats.read()
    os.waitpid(pid, 0)
    found: dict[str, int] = {}
    for line in text.splitlines():
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
