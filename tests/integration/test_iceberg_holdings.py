"""What is published is what the table holds (issue 44): the segments API lists the segments
whose files the datasource's Iceberg table holds in its current snapshot, not every segment
row. A row whose file the table lacks is not listed; a file another engine deletes from the
table leaves the list; a later publish lists beside what is left. A table's small manifests
are merged as they reach `commit.manifest.min-count-to-merge`, each live file kept once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.expressions import In, StartsWith
from pyiceberg.table import TableProperties
from sqlalchemy import Engine

from supervisor.db.engine import session_factory
from supervisor.db.models import SegmentRow
from supervisor.errors import NotFoundError
from supervisor.lake.tables import Lake
from supervisor.services import segments
from tasks.protocol import PublishOutcome as Outcome
from tests.integration.test_iceberg_commits import (
    ROWS,
    action,
    engine,
    lake,
    publish,
    read_back,
)

__all__ = ["engine", "lake"]  # the fixtures, shared with the commits' tests


def listed(engine: Engine, lake: Lake) -> tuple[list[str], list[str]]:
    """The datasources, and the wiki datasource's segment ids, as the API answers them."""
    with session_factory(engine)() as session:
        names = segments.datasources(session, lake)
        try:
            ids = segments.used_segments(session, lake, "wiki", full=False)
        except NotFoundError:
            ids = []
        return names, sorted(str(i) for i in ids)


def test_the_segments_api_lists_what_the_table_holds(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    deep = tmp_path / "deep"
    assert listed(engine, lake) == ([], [])
    acts = [action(deep, partition, 0) for partition in range(3)]
    for partition, act in enumerate(acts):
        assert publish(engine, lake, act, f"t{partition}").outcome is Outcome.PUBLISHED
    ids = [act.segments[0].id for act in acts]
    assert listed(engine, lake) == (["wiki"], sorted(ids))
    # a used segment row whose file the table does not hold is not published
    with session_factory(engine)() as session:
        row = session.get(SegmentRow, ids[0])
        assert row is not None
        session.add(
            SegmentRow(
                **{c.name: getattr(row, c.name) for c in SegmentRow.__table__.columns}
                | {"id": "stray", "path": str(deep / "wiki" / "stray.parquet")}
            )
        )
        session.commit()
    assert listed(engine, lake) == (["wiki"], sorted(ids))
    # another engine deletes partition 1's rows: its file leaves the table and the list
    read_back(metadata_url).delete(StartsWith("word", "p1-"))
    assert listed(engine, lake) == (["wiki"], sorted([ids[0], ids[2]]))
    # the next publish goes on from what the table holds now
    later = action(deep, 0, 10)
    assert publish(engine, lake, later, "t3").outcome is Outcome.PUBLISHED
    assert listed(engine, lake) == (["wiki"], sorted([ids[0], ids[2], later.segments[0].id]))
    words = read_back(metadata_url).scan().to_arrow().column("word").to_pylist()
    assert sorted(words) == sorted([f"p0-{i}" for i in range(20)] + [f"p2-{i}" for i in range(10)])
    # every file deleted: the datasource is listed no more
    read_back(metadata_url).delete(StartsWith("word", "p"))
    assert listed(engine, lake) == ([], [])
    with session_factory(engine)() as session, pytest.raises(NotFoundError):
        segments.used_segments(session, lake, "wiki", full=True)


def test_manifests_are_merged_each_live_file_kept_once(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    deep = tmp_path / "deep"
    publishes = 14
    acts = [action(deep, 0, ROWS * n) for n in range(publishes)]
    assert publish(engine, lake, acts[0], "t0").outcome is Outcome.PUBLISHED
    with read_back(metadata_url).transaction() as txn:  # another writer sets the table's
        txn.set_properties({TableProperties.MANIFEST_MIN_MERGE_COUNT: "4"})
    counts = []
    for n, act in enumerate(acts[1:], start=1):
        if n == 3:  # another engine deletes the first file's rows before the first merge
            read_back(metadata_url).delete(In("word", [f"p0-{i}" for i in range(ROWS)]))
        assert publish(engine, lake, act, f"t{n}").outcome is Outcome.PUBLISHED
        table = read_back(metadata_url)
        counts.append(len(table.current_snapshot().manifests(table.io)))  # type: ignore[union-attr]
    assert max(counts) < 4 and counts.count(1) >= 3  # merged, more than once
    table = read_back(metadata_url)
    words = table.scan().to_arrow().column("word").to_pylist()
    assert sorted(words) == sorted(f"p0-{i}" for i in range(ROWS, ROWS * publishes))
    tasks = [s.summary.get("sluicegate.task") for s in table.snapshots() if s.summary]
    assert [t for t in tasks if t] == [f"t{n}" for n in range(publishes)]
    ids = sorted(act.segments[0].id for act in acts[1:])
    assert listed(engine, lake) == (["wiki"], ids)
