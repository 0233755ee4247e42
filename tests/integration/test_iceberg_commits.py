"""The publish transaction's Iceberg commit on SQLite and PostgreSQL (issue 44): eight groups
of one supervisor whose commits are made to race lose and double nothing, and leave no file of
a commit that lost; replicas of one range add one snapshot; a deposed leader's publish adds
none. The table is read back by pyiceberg's own SqlCatalog on the same database."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table
from sqlalchemy import Engine, inspect, select, text
from sqlalchemy.engine import make_url

from supervisor.clock import utc_now
from supervisor.db.engine import make_engine, migrate, session_factory
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import CommittedOffsetsRow, SegmentRow
from supervisor.devstack.postgres import LocalPostgres
from supervisor.lake import append
from supervisor.lake import catalog as lake_catalog
from supervisor.lake.tables import (
    CATALOG,
    SUMMARY_ADOPTED,
    SUMMARY_COMMITTED,
    SUMMARY_OPERATION,
    SUMMARY_SUPERVISOR,
    SUMMARY_TASK,
    Lake,
    open_lake,
)
from supervisor.services.publish import PublishService
from supervisor.services.supervisors import Actor, SupervisorService
from supervisor.settings import Settings
from supervisor.testkit.service import RunningService
from tasks.protocol import PublishAction, SegmentDescriptor, SequenceNumbers
from tasks.protocol import PublishOutcome as Outcome
from tasks.storage import parse
from tests.specs import spec

GROUPS = 8
ROUNDS = 3
ROWS = 10  # per segment file
DAY = "2026-11-22"


@pytest.fixture
def engine(metadata_url: str) -> Iterator[Engine]:
    made = make_engine(metadata_url)
    migrate(made)
    yield made
    made.dispose()


@pytest.fixture
def lake(engine: Engine, tmp_path: Path) -> Lake:
    return open_lake(engine, parse(tmp_path / "deep"))


def segment(deep: Path, partition: int, start: int, replica: str = "r0") -> SegmentDescriptor:
    """A segment file as a task writes it: rows `start` .. `start + ROWS` of the partition."""
    path = deep / "wiki" / f"p{partition}-{start}-{replica}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = int(datetime.fromisoformat(f"{DAY}T10:00:00+00:00").timestamp() * 1_000_000)
    table = pa.table(
        {
            "__time": pa.array([stamp + i for i in range(ROWS)], pa.timestamp("us", tz="UTC")),
            "word": [f"p{partition}-{start + i}" for i in range(ROWS)],
            "count": pa.array([1] * ROWS, pa.int64()),
        }
    )
    pq.write_table(table, path, compression="zstd")
    return SegmentDescriptor(
        id=f"wiki_{partition}_{start}",
        dataSource="wiki",
        intervalStart=f"{DAY}T00:00:00+00:00",
        intervalEnd="2026-11-23T00:00:00+00:00",
        version=f"v{partition}-{start}",
        partitionNum=0,
        path=str(path),
        size=path.stat().st_size,
        numRows=ROWS,
        dimensions=["word"],
        metrics=["count"],
    )


def action(
    deep: Path, partition: int, start: int, replica: str = "r0", supervisor: str = "wiki"
) -> PublishAction:
    def seq(kind: str, offset: int) -> SequenceNumbers:
        return SequenceNumbers(
            type=kind,  # type: ignore[arg-type]
            stream="edits",
            partitionSequenceNumberMap={str(partition): offset},
        )

    return PublishAction(
        supervisorId=supervisor,
        dataSource="wiki",
        segments=[segment(deep, partition, start, replica)],
        startMetadata=seq("start", start),
        endMetadata=seq("end", start + ROWS),
    )


def publish(engine: Engine, lake: Lake, act: PublishAction, task: str, epoch: Any = None) -> Any:
    with session_factory(engine)() as session:
        return PublishService(session, utc_now, epoch, lake).publish(task, act)


def read_back(metadata_url: str) -> Table:
    return SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.wiki")


@pytest.mark.parametrize("supervisors", [1, GROUPS])
def test_eight_groups_whose_commits_race_lose_and_double_nothing(
    supervisors: int,
    engine: Engine,
    lake: Lake,
    metadata_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The eight groups are one supervisor's (their offsets, one row, queue them: a group that
    loses there publishes again) or eight supervisors' of one datasource (their Iceberg commits
    race on the table's metadata location: a commit that loses is retried on the new
    metadata within its transaction, its staged files deleted)."""
    deep = tmp_path / "deep"
    owner = [f"wiki-{p}" if supervisors > 1 else "wiki" for p in range(GROUPS)]
    # the table exists before the race (a first publish made it)
    assert publish(engine, lake, action(deep, 99, 0), "first").outcome is Outcome.PUBLISHED
    # every publish stages its snapshot before its transaction writes anything, then waits
    # until all eight have staged on the same table version (or a second has passed) before
    # it goes on to its offsets and its swap
    staged = threading.Barrier(GROUPS)
    write = lake_catalog.MetadataCatalog._write_metadata
    lost = []
    lost_lists: set[str] = set()

    raced = threading.Event()  # the first eight met: the rest goes at its own pace

    def racing_write(metadata: Any, io: Any, path: str) -> None:
        write(metadata, io, path)
        if not raced.is_set():
            with contextlib.suppress(threading.BrokenBarrierError):
                staged.wait(timeout=1.0)
            raced.set()

    monkeypatch.setattr(lake_catalog.MetadataCatalog, "_write_metadata", staticmethod(racing_write))
    discard = lake_catalog.MetadataCatalog.discard

    def counted_discard(self: Any, pending: Any) -> None:
        lost.append(pending.location)
        kept = {s.snapshot_id for s in pending.base.metadata.snapshots} if pending.base else set()
        lost_lists.update(
            s.manifest_list for s in pending.metadata.snapshots if s.snapshot_id not in kept
        )
        discard(self, pending)

    monkeypatch.setattr(lake_catalog.MetadataCatalog, "discard", counted_discard)
    outcomes: dict[int, list[Outcome]] = {p: [] for p in range(GROUPS)}

    def group(partition: int) -> None:
        for round_ in range(ROUNDS):
            act = action(deep, partition, round_ * ROWS, supervisor=owner[partition])
            for _ in range(50):  # the task's publish client retries retryable outcomes
                result = publish(engine, lake, act, f"task-{partition}-{round_}")
                if result.outcome is not Outcome.RETRY:
                    outcomes[partition].append(result.outcome)
                    break

    threads = [threading.Thread(target=group, args=(p,)) for p in range(GROUPS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert outcomes == {p: [Outcome.PUBLISHED] * ROUNDS for p in range(GROUPS)}

    table = read_back(metadata_url)
    words = table.scan().to_arrow().column("word").to_pylist()
    expected = [f"p99-{i}" for i in range(ROWS)]
    expected += [f"p{p}-{i}" for p in range(GROUPS) for i in range(ROUNDS * ROWS)]
    assert sorted(words) == sorted(expected)  # nothing lost, nothing twice
    # seven of the first eight lost: their swap (eight supervisors) or their offsets (one),
    # and what they had staged is gone
    assert lost, "the commits did not race"
    assert len(table.snapshots()) == 1 + GROUPS * ROUNDS
    with session_factory(engine)() as session:
        rows = session.execute(
            select(CommittedOffsetsRow.supervisor_id, CommittedOffsetsRow.offsets)
        )
        committed = {supervisor: dict(offsets) for supervisor, offsets in rows}
    expected_offsets: dict[str, dict[str, int]] = {}
    for partition, supervisor in enumerate(owner):
        expected_offsets.setdefault(supervisor, {})[str(partition)] = ROUNDS * ROWS
    expected_offsets.setdefault("wiki", {})["99"] = ROWS
    assert committed == expected_offsets
    # each supervisor's last snapshot says its committed offsets
    last = {s.summary[SUMMARY_SUPERVISOR]: s.summary for s in table.snapshots() if s.summary}
    assert {k: json.loads(v[SUMMARY_COMMITTED]) for k, v in last.items()} == committed
    # what a lost commit wrote is gone: every metadata file left is the current one or in
    # its log, every manifest list a snapshot's
    folder = Path(table.metadata.location) / "metadata"
    kept = {Path(e.metadata_file).name for e in table.metadata.metadata_log}
    kept.add(Path(table.metadata_location).name)
    assert {p.name for p in folder.glob("*.metadata.json")} == kept
    lists = {Path(s.manifest_list).name for s in table.snapshots()}
    assert {p.name for p in folder.glob("snap-*.avro")} == lists
    assert all(not Path(path).exists() for path in lost)
    # nor does the cache of manifest lists keep the lost commits' (deleted) ones
    assert lost_lists and not lost_lists & set(append._MANIFESTS._entries)


def test_replicas_add_one_snapshot_and_a_deposed_leader_none(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    deep = tmp_path / "deep"
    with session_factory(engine)() as session:
        assert LeaseRepository(session).acquire("a", "http://a", 60) == 1
    first = action(deep, 0, 0, "r0")
    assert publish(engine, lake, first, "r0", epoch=1).outcome is Outcome.PUBLISHED
    twin = action(deep, 0, 0, "r1")  # the replica's files of the same range
    assert publish(engine, lake, twin, "r1", epoch=1).outcome is Outcome.ALREADY_PUBLISHED
    table = read_back(metadata_url)
    assert len(table.snapshots()) == 1
    assert [t.file.file_path for t in table.scan().plan_files()] == [first.segments[0].path]
    # another overlord takes the lease: the old leader's next publish commits nothing
    with session_factory(engine)() as session:
        LeaseRepository(session).release("a", 1)
        assert LeaseRepository(session).acquire("b", "http://b", 60) == 2
    late = action(deep, 0, ROWS)
    result = publish(engine, lake, late, "deposed", epoch=1)
    assert result.outcome is Outcome.RETRY and "epoch 2" in result.reason
    assert len(read_back(metadata_url).snapshots()) == 1
    assert publish(engine, lake, late, "leader", epoch=2).outcome is Outcome.PUBLISHED
    table = read_back(metadata_url)
    assert [s.summary[SUMMARY_TASK] for s in table.snapshots() if s.summary] == ["r0", "leader"]
    assert table.scan().to_arrow().num_rows == 2 * ROWS


# -- a deployment of the release before Iceberg ----------------------------------------------

PREVIOUS = Path(__file__).parent.parent / "fixtures" / "previous_release"


def previous_release(root: Path) -> str:
    """The metadata DB and segments the previous release left (its dump, and its files under
    `root`); the DB's URL. Its segments: wiki, offsets 0..14, three files over two days."""
    shutil.copytree(PREVIOUS / "segments", root / "segments")
    script = (PREVIOUS / "metadata.sql").read_text().replace("{ROOT}", str(root))
    with sqlite3.connect(root / "metadata.db") as db:
        db.executescript(script)
    return f"sqlite:///{root / 'metadata.db'}"


def migrate_previous(sqlite_url: str, engine: Engine) -> None:
    """`engine`'s DB migrated to head, holding the previous release's published segments and
    committed offsets (copied from its SQLite DB)."""
    migrate(engine)
    source = make_engine(sqlite_url)
    try:
        with source.connect() as old, engine.begin() as new:
            for model in (SegmentRow, CommittedOffsetsRow):
                # the columns that release had (a later one adds some: they take defaults)
                present = {c["name"] for c in inspect(source).get_columns(model.__tablename__)}
                columns = [c for c in model.__table__.columns if c.name in present]
                rows = [dict(row._mapping) for row in old.execute(select(*columns))]
                new.execute(model.__table__.insert(), rows)
    finally:
        source.dispose()


def _old_and_next_rows_once(url: str) -> Table:
    """The wiki table after the previous release's 14 rows and one publish of 10 more: each
    row in it once."""
    table = SqlCatalog(CATALOG, uri=url).load_table("druid.wiki")
    words = table.scan().to_arrow().column("word").to_pylist()
    expected = [f"w{i}" for i in range(14)] + [f"p0-{i}" for i in range(14, 24)]
    assert sorted(words) == sorted(expected)
    return table


def test_a_previous_releases_segments_are_adopted_when_the_service_starts(tmp_path: Path) -> None:
    url = previous_release(tmp_path)
    settings = Settings(metadata_url=url, deep_storage=tmp_path / "segments", run_supervisors=False)
    with RunningService(settings) as service, httpx.Client(base_url=service.url) as api:
        # the segments API shows what it showed before
        listed = api.get("/druid/coordinator/v1/metadata/datasources/wiki/segments").json()
        assert len(listed) == 3
    table = SqlCatalog(CATALOG, uri=url).load_table("druid.wiki")
    rows = table.scan().to_arrow()
    assert sorted(rows.column("word").to_pylist()) == sorted(f"w{i}" for i in range(14))
    assert rows.column("lang").to_pylist().count("en") == 4  # the discovered dimension
    [snapshot] = table.snapshots()
    assert snapshot.summary is not None and snapshot.summary[SUMMARY_ADOPTED] == "3"
    # its next start adopts nothing again
    with RunningService(settings):
        pass
    assert len(SqlCatalog(CATALOG, uri=url).load_table("druid.wiki").snapshots()) == 1


def test_a_previous_releases_segments_join_the_first_publish_to_its_table(tmp_path: Path) -> None:
    url = previous_release(tmp_path)
    engine = make_engine(url)
    try:
        migrate(engine)  # 0010 -> head, as the new release's start does, without its adoption
        lake = open_lake(engine, parse(tmp_path / "segments"))
        act = action(tmp_path / "segments", 0, 14)
        assert publish(engine, lake, act, "next").outcome is Outcome.PUBLISHED
    finally:
        engine.dispose()
    table = _old_and_next_rows_once(url)
    [snapshot] = table.snapshots()
    assert snapshot.summary is not None and snapshot.summary[SUMMARY_ADOPTED] == "3"
    assert json.loads(snapshot.summary[SUMMARY_COMMITTED]) == {"0": 24}


def test_a_reset_is_a_snapshot_holding_the_offsets_from_then_on(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    """resetOffsets and a hard reset each add an empty snapshot whose summary holds the
    supervisor's committed offsets after it; the rows published before stay."""
    sessions = session_factory(engine)
    with sessions() as session:
        SupervisorService(session, utc_now).submit(spec("wiki", topic="edits"), Actor())
        session.commit()
    act = action(tmp_path / "deep", 0, 0)
    assert publish(engine, lake, act, "t1").outcome is Outcome.PUBLISHED
    for operation, expected in (("resetOffsets", {"0": 5, "1": 7}), ("reset", {})):
        with sessions() as session:
            service = SupervisorService(session, utc_now, lake=lake)
            if operation == "reset":
                service.reset("wiki", Actor())
            else:
                body = {
                    "type": "kafka",
                    "partitions": {
                        "type": "end",
                        "stream": "edits",
                        "partitionOffsetMap": {"0": 5, "1": 7},
                    },
                }
                service.reset_offsets("wiki", body, Actor())
            session.commit()
        with sessions() as session:
            row = session.get(CommittedOffsetsRow, "wiki")
            assert (dict(row.offsets) if row else {}) == expected
        latest = read_back(metadata_url).current_snapshot()
        assert latest is not None and latest.summary is not None
        assert latest.summary[SUMMARY_OPERATION] == operation
        assert json.loads(latest.summary[SUMMARY_COMMITTED]) == expected
    table = read_back(metadata_url)
    assert table.scan().to_arrow().num_rows == ROWS  # what was published stays
    assert len(table.snapshots()) == 3


def test_a_new_column_and_a_new_granularity_evolve_the_table(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    """A publish whose file holds a column the table lacks (a discovered dimension) adds it;
    one whose segments an hour granularity cut (the spec changed) evolves the partitioning;
    every row reads back, old files with null in the new column."""
    deep = tmp_path / "deep"
    assert publish(engine, lake, action(deep, 0, 0), "t1").outcome is Outcome.PUBLISHED
    later = action(deep, 0, ROWS)
    path = Path(later.segments[0].path)
    rows = pq.read_table(path)
    pq.write_table(rows.append_column("lang", pa.array(["en"] * ROWS)), path)
    hourly = later.segments[0].model_copy(
        update={
            "intervalStart": f"{DAY}T10:00:00+00:00",
            "intervalEnd": f"{DAY}T11:00:00+00:00",
            "size": path.stat().st_size,
            "dimensions": ["word", "lang"],
        }
    )
    later = later.model_copy(update={"segments": [hourly]})
    assert publish(engine, lake, later, "t2").outcome is Outcome.PUBLISHED
    table = read_back(metadata_url)
    assert [f.name for f in table.schema().fields] == ["__time", "word", "count", "lang"]
    assert [str(f.transform) for f in table.spec().fields] == ["hour"]
    assert len(table.specs()) == 2  # the day spec stays for the files written under it
    read = table.scan().to_arrow()
    assert read.num_rows == 2 * ROWS
    assert read.column("lang").to_pylist().count("en") == ROWS
    assert read.column("lang").null_count == ROWS


def test_a_read_only_postgres_user_reads_the_tables(
    postgres: LocalPostgres, tmp_path: Path
) -> None:
    """What the README tells an operator to grant a reader on PostgreSQL (SELECT on the two
    catalog tables, nothing else) is enough for pyiceberg's SqlCatalog, and writes nothing."""
    metadata_url = postgres.create_database(f"ro_{uuid.uuid4().hex[:8]}")
    engine = make_engine(metadata_url)
    try:
        migrate(engine)
        lake = open_lake(engine, parse(tmp_path / "deep"))
        assert publish(engine, lake, action(tmp_path / "deep", 0, 0), "t1").outcome.success
        reader = f"reader_{uuid.uuid4().hex[:8]}"
        tables = "iceberg_tables, iceberg_namespace_properties"
        with engine.begin() as conn:
            conn.execute(text(f"CREATE ROLE {reader} LOGIN PASSWORD 'reader-pass'"))
            conn.execute(text(f"GRANT SELECT ON {tables} TO {reader}"))
    finally:
        engine.dispose()
    url = make_url(metadata_url).set(username=reader, password="reader-pass")
    catalog = SqlCatalog(CATALOG, uri=url.render_as_string(hide_password=False))
    assert catalog.load_table("druid.wiki").scan().to_arrow().num_rows == ROWS
    assert catalog.list_tables("druid") == [("druid", "wiki")]
    with pytest.raises(Exception, match="permission denied"):
        catalog.drop_table("druid.wiki")


def test_a_publish_whose_table_was_made_meanwhile_adopts_nothing_twice(
    postgres: LocalPostgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first publish to a datasource of the previous release stages the table's making
    (its old segments adopted); before its swap, another overlord's start makes the table.
    The publish's swap loses, and its retry adds its own files alone: no old row twice."""
    from supervisor.services import publish as publishing

    url = postgres.create_database(f"adopt_{uuid.uuid4().hex[:8]}")
    dump = previous_release(tmp_path)  # the previous release's DB, loaded into PostgreSQL
    engine = make_engine(url)
    try:
        migrate_previous(dump, engine)
        lake = open_lake(engine, parse(tmp_path / "segments"))
        commit = Lake.commit

        def made_meanwhile(self: Lake, session: Any, snapshot: Any, staged: Any) -> None:
            assert publishing.adopt_published(session_factory(engine), lake) == ["wiki"]
            commit(self, session, snapshot, staged)

        monkeypatch.setattr(Lake, "commit", made_meanwhile)
        act = action(tmp_path / "segments", 0, 14)
        assert publish(engine, lake, act, "next").outcome is Outcome.PUBLISHED
    finally:
        engine.dispose()
    table = _old_and_next_rows_once(url)
    assert [s.summary.get(SUMMARY_OPERATION) for s in table.snapshots() if s.summary] == [
        "adopt",
        None,
    ]


def test_metadata_files_past_the_log_go_only_once_their_commit_is_made(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    """A commit whose metadata log drops an entry deletes that entry's file after its
    transaction commits: a rolled-back one leaves every file the table's metadata lists."""
    deep = tmp_path / "deep"
    assert publish(engine, lake, action(deep, 0, 0), "t0").outcome is Outcome.PUBLISHED
    theirs = read_back(metadata_url)  # pyiceberg's own catalog: the log kept short
    theirs.transaction().set_properties(
        {"write.metadata.previous-versions-max": "1"}
    ).commit_transaction()
    folder = Path(theirs.metadata.location) / "metadata"

    def listed(table: Table) -> set[str]:
        return {Path(e.metadata_file).name for e in table.metadata.metadata_log} | {
            Path(table.metadata_location).name
        }

    def property_committed(commit: bool) -> None:
        with session_factory(engine)() as session, lake.catalog.bound(session):
            table = lake.catalog.load_table("druid.wiki")
            assert table.metadata.metadata_log  # an entry to drop
            table.transaction().set_properties({"round": str(commit)}).commit_transaction()
            session.commit() if commit else session.rollback()

    property_committed(False)
    current = read_back(metadata_url)
    assert "round" not in current.properties
    assert listed(current) <= {p.name for p in folder.glob("*.metadata.json")}
    property_committed(True)
    current = read_back(metadata_url)
    assert current.properties["round"] == "True"
    assert len(current.metadata.metadata_log) == 1
    on_disk = {p.name for p in folder.glob("*.metadata.json")}
    assert listed(current) <= on_disk
    assert len(on_disk - listed(current)) == 1  # the rolled-back commit's own file, an orphan
