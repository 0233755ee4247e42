"""Processes as Linux's /proc shows them: a process's state, parent and session, its children,
the tree under it, and the processes whose command line names something. Read in one place:
a command name may hold spaces and parentheses, so a `stat` line is split after its last `)`.
Every reader answers for the moment it reads; a process may end right after."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")
# indexes into `stat_fields`: the fields after the command name (man 5 proc, from `state`)
STATE, PARENT, SESSION, USER_TICKS, SYSTEM_TICKS = 0, 1, 3, 11, 12


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name, `state` first (OSError when
    there is no such process)."""
    return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        return stat_fields(pid)[STATE] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def parent(pid: int) -> int | None:
    """`pid`'s parent (None when it is gone)."""
    try:
        return int(stat_fields(pid)[PARENT])
    except (OSError, IndexError, ValueError):
        return None


def pids() -> list[int]:
    """Every process there is now."""
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def threads(pid: int) -> list[int]:
    """The ids of `pid`'s threads (none when it is gone)."""
    try:
        return [int(entry.name) for entry in (PROC / str(pid) / "task").iterdir()]
    except OSError:
        return []


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (each of its threads' children)."""
    found: list[int] = []
    for thread in threads(pid):
        listed = PROC / str(pid) / "task" / str(thread) / "children"
        try:
            found += [int(child) for child in listed.read_text().split()]
        except OSError:
            continue
    return found


def process_tree(pid: int) -> list[int]:
    """The process and all its descendants, parents first."""
    tree, queue = [], [pid]
    while queue:
        current = queue.pop(0)
        if current in tree:
            continue
        tree.append(current)
        queue += children(current)
    return tree


def ancestors(pid: int) -> set[int]:
    """`pid` and every process above it, init aside."""
    found: set[int] = set()
    current: int | None = pid
    while current is not None and current > 1 and current not in found:
        found.add(current)
        current = parent(current)
    return found


def with_marker(marker: bytes, *, besides: int | None = None) -> list[int]:
    """The processes whose command line holds `marker` (its arguments are NUL-separated),
    `besides` aside."""
    found = []
    for pid in pids():
        if pid == besides:
            continue
        try:
            if marker in (PROC / str(pid) / "cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found
