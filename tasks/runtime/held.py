"""The rows a running task holds and has not published, for a query of the overlord's (Druid's
realtime rows: the SQL API, supervisor/services/sql_live.py).

A task's rows are in its persists: each micro-batch's Parquet files, written for an exact
range of offsets, listed in order by the sequence they belong to (tasks/runtime/sequences.py).
A sequence is committed whole, with its segments, so the overlord names the committed offsets
it read with the table (`since`) and gets the files of every sequence that starts at or past
them, and the offsets they cover: from the first such sequence's start to the task's current
offsets. A persist is deleted once its sequence is published; one gone, or found empty, means
the overlord's committed offsets are older than a publish: a `Gone` for it to read again."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Listed
from dataclasses import dataclass

from tasks.partitions import Offsets, offsets_json
from tasks.runtime.sequences import Sequence


class Gone(Exception):
    """The rows asked for are published (or being): ask again with the newer offsets."""


@dataclass(frozen=True)
class Held:
    start: Offsets  # per partition, where the rows begin (at or past `since`)
    end: Offsets  # and where they end: the task's current offsets
    persists: list[str]  # the persist directories holding them, in order

    def as_json(self, files: list[str], where: str) -> dict[str, object]:
        return {
            "start": offsets_json(self.start),
            "end": offsets_json(self.end),
            "files": files,
            "where": where,
        }


def held_since(sequences: Listed[Sequence], current: Offsets, since: Offsets) -> Held:
    """What the task holds past `since` (a partition `since` lacks: all of it). Call under
    the indexer's lock, so that the persists and `current` agree: a persist is listed in its
    sequence as `current` moves past its end. Commits are whole sequences, in order, so each
    sequence ends at or before `since` (committed) or starts at or past it (held); `since`
    inside one is a `Gone`: offsets this task's sequences do not line up with."""
    chosen: list[Sequence] = []
    for sequence in sequences:
        if all(offset >= since.get(p, offset) for p, offset in sequence.start.items()):
            chosen.append(sequence)
            continue
        end = sequence.end if sequence.end is not None else current
        if chosen or any(end.get(p, offset) > since.get(p, offset) for p, offset in end.items()):
            raise Gone(f"the committed offsets fall inside sequence {sequence.index}")
    if not chosen:
        return Held(start=dict(current), end=dict(current), persists=[])
    return Held(
        start=dict(chosen[0].start),
        end=dict(current),
        persists=[persist for sequence in chosen for persist in sequence.persists],
    )


def files_of(persists: list[str], listing: Callable[[str], list[str]]) -> list[str]:
    """Every Parquet file of the persists, in order. Each persist holds one at least (an
    empty batch's has no rows, not no file), so one with none is gone: deleted by its
    publish since the caller read the committed offsets."""
    found: list[str] = []
    for persist in persists:
        files = [path for path in listing(persist) if not _hidden(path)]
        if not files:
            raise Gone(f"persist {persist.rsplit('/', 1)[-1]} is gone: its rows are published")
        found.extend(files)
    return found


def _hidden(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith(("_", "."))


def one_of(persists: list[str], path: str) -> str:
    """`path`, if it is a Parquet file of one of the persists (a `Gone` if not: published
    since, or never one). What the task serves its overlord by path, and nothing else."""
    folder, _, name = path.rpartition("/")
    if not name.endswith(".parquet") or _hidden(path) or folder not in set(persists):
        raise Gone(f"{name or path} is not a file of the rows this task holds")
    return path
