"""tasks/runtime/held.py: which persists hold a task's rows past the committed offsets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.runtime.held import Gone, files_of, held_since, one_of
from tasks.runtime.sequences import Sequence
from tasks.storage import LOCAL


def _sequences() -> list[Sequence]:
    # three sequences over partitions 0 and 1; the last open, read to (30, 33)
    return [
        Sequence(0, {0: 0, 1: 0}, end={0: 10, 1: 12}, persists=["p0a", "p0b"]),
        Sequence(1, {0: 10, 1: 12}, end={0: 20, 1: 25}, persists=["p1a"]),
        Sequence(2, {0: 20, 1: 25}, persists=["p2a", "p2b"]),
    ]


def test_the_sequences_from_the_committed_offsets_on_are_held_to_the_current_ones() -> None:
    current = {0: 30, 1: 33}
    nothing = held_since(_sequences(), current, {})
    assert nothing.start == {0: 0, 1: 0} and nothing.end == current
    assert nothing.persists == ["p0a", "p0b", "p1a", "p2a", "p2b"]
    one = held_since(_sequences(), current, {0: 10, 1: 12})
    assert one.start == {0: 10, 1: 12} and one.persists == ["p1a", "p2a", "p2b"]
    # a successor's: the committed offsets are before its start, so all of it is held
    assert held_since(_sequences()[2:], current, {0: 10, 1: 12}).persists == ["p2a", "p2b"]
    everything = held_since(_sequences(), {0: 20, 1: 25}, {0: 20, 1: 25})
    assert everything.persists == ["p2a", "p2b"]


def test_offsets_committed_past_what_the_task_read_hold_nothing() -> None:
    done = [Sequence(0, {0: 0}, end={0: 10}, persists=["p"])]
    held = held_since(done, {0: 10}, {0: 10})
    assert held.persists == [] and held.start == held.end == {0: 10}


def test_committed_offsets_inside_a_sequence_are_gone_not_a_guess() -> None:
    with pytest.raises(Gone):
        held_since(_sequences(), {0: 30, 1: 33}, {0: 15, 1: 12})
    with pytest.raises(Gone):  # inside the open one
        held_since(_sequences(), {0: 30, 1: 33}, {0: 25, 1: 30})


def test_a_persist_without_files_is_gone_and_hidden_files_are_left_out(tmp_path: Path) -> None:
    first, second = tmp_path / "0000-000000", tmp_path / "0000-000001"
    first.mkdir()
    for name in ("part-0.parquet", "_SUCCESS.parquet", ".part-0.parquet.crc", "x.txt"):
        (first / name).write_bytes(b"")
    assert files_of([str(first)], LOCAL.files) == [str(first / "part-0.parquet")]
    with pytest.raises(Gone):
        files_of([str(first), str(second)], LOCAL.files)


def test_only_a_parquet_file_of_a_held_persist_is_served_by_path() -> None:
    """What the chat API gives by path (rows/held/file) is a file of a persist held now,
    never another file: a path out of a persist, a hidden file, or a published persist's."""
    persists = ["/w/persists/0001-000001", "/w/persists/0001-000002"]
    assert one_of(persists, "/w/persists/0001-000002/part-0.parquet").endswith("part-0.parquet")
    for path in (
        "/w/persists/0001-000002/../../../etc/passwd.parquet",
        "/w/persists/0001-000002/sub/part-0.parquet",
        "/w/persists/0001-000002/_SUCCESS",
        "/w/persists/0001-000002/.part-0.parquet.crc",
        "/w/persists/0001-000002/part-0.txt",
        "/w/persists/0000-000009/part-0.parquet",
        "/etc/passwd",
        "",
    ):
        with pytest.raises(Gone):
            one_of(persists, path)
