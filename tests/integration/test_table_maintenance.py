"""The tables kept bounded (supervisor/services/maintenance.py), on SQLite and PostgreSQL:
snapshots past the retention expire (the newest, the current and each supervisor's newest
kept), the files only they named go and every kept snapshot still reads; the automatic kill
deletes unused segments past the buffer period, with the snapshots that held them."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import Engine, select

from supervisor.clock import utc_now
from supervisor.db.engine import session_factory
from supervisor.db.models import SegmentRow, TaskRow
from supervisor.db.retention import CompactionConfigs, SegmentStates
from supervisor.db.tasks import TaskRepository
from supervisor.errors import NotLeading, Raced
from supervisor.lake import append, rewrite
from supervisor.lake.holdings import live_files
from supervisor.lake.tables import CATALOG, SUMMARY_SUPERVISOR, Lake, published
from supervisor.model.compaction import parse_config
from supervisor.model.fence import Unfenced
from supervisor.runner.protocol import Exited, Launched
from supervisor.services import kill as kill_module
from supervisor.services.compaction import FIRST_BACKOFF_S, CompactionDuty, compact_task, plan
from supervisor.services.compaction_commit import CompactionCommit
from supervisor.services.kill import Kill, KillService
from supervisor.services.maintenance import SNAPSHOTS_KEPT, MaintenanceDuty
from supervisor.services.retention import RetentionService, Selection
from supervisor.services.task_life import TaskLife, Unsettled
from supervisor.settings import Settings
from tasks.protocol import (
    CompactTask,
    PublishOutcome,
    ReplaceAction,
    SegmentDescriptor,
    TaskReport,
    TaskState,
)
from tests.integration.test_iceberg_commits import ROWS, action, engine, lake, publish

__all__ = ["engine", "lake"]  # the fixtures, shared with the publish transaction's tests


def _publish_wiki(engine: Engine, lake: Lake, deep: Path, files: int) -> None:
    """`files` publishes to wiki's partition 0, of ROWS rows each (offsets from 0)."""
    for start in range(0, files * ROWS, ROWS):
        act = action(deep, 0, start)
        assert publish(engine, lake, act, f"w{start}").outcome is PublishOutcome.PUBLISHED


def _duty(engine: Engine, lake: Lake, tmp_path: Path, **settings: object) -> MaintenanceDuty:
    values = {"deep_storage": tmp_path / "deep", "work_dir": tmp_path / "work", **settings}
    return MaintenanceDuty(session_factory(engine), lake, Unfenced(), utc_now, Settings(**values))


def test_old_snapshots_expire_and_unused_segments_are_killed_with_their_files(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    deep = tmp_path / "deep"
    # "other" publishes three ranges first, then "wiki" twenty-five
    for start in range(0, 3 * ROWS, ROWS):
        act = action(deep, 1, start, supervisor="other")
        assert publish(engine, lake, act, f"o{start}").outcome is PublishOutcome.PUBLISHED
    _publish_wiki(engine, lake, deep, 25)
    catalog = SqlCatalog(CATALOG, uri=metadata_url)
    before = catalog.load_table("druid.wiki")
    lists = {
        s.snapshot_id: Path(s.manifest_list.removeprefix("file://")) for s in before.snapshots()
    }
    other_newest = [s for s in before.snapshots() if s.summary.get(SUMMARY_SUPERVISOR) == "other"][
        -1
    ]

    expired = _duty(engine, lake, tmp_path, snapshot_retention="PT0S").expire()
    table = catalog.load_table("druid.wiki")
    kept = {s.snapshot_id for s in table.snapshots()}
    newest = {s.snapshot_id for s in before.snapshots()[-SNAPSHOTS_KEPT:]}
    assert kept == newest | {other_newest.snapshot_id}
    assert expired == {"wiki": 28 - len(kept)}
    assert all(not lists[i].exists() for i in set(lists) - kept)  # their manifest lists gone
    # and out of the overlord's caches, which would otherwise keep them until their bound
    gone_lists = [s.manifest_list for s in before.snapshots() if s.snapshot_id not in kept]
    assert gone_lists and all(append._MANIFESTS.get(listing) is None for listing in gone_lists)
    assert all(append._MANIFESTS.get(s.manifest_list) for s in table.snapshots())
    assert all(lists[i].exists() for i in kept)
    for snapshot in table.snapshots():  # every kept snapshot reads
        table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    assert table.scan().to_arrow().num_rows == 28 * ROWS
    files = [Path(r[0]) for r in _rows(engine)]
    assert len(files) == 28 and all(f.exists() for f in files)  # named by rows: kept
    assert _duty(engine, lake, tmp_path, snapshot_retention="PT1H").expire() == {}

    # five of wiki's segments marked unused, then killed automatically
    victims = [f"wiki_0_{start}" for start in range(0, 5 * ROWS, ROWS)]
    with session_factory(engine)() as session:
        service = RetentionService(session, lake, utc_now())
        assert service.mark_unused("wiki", Selection(ids=victims), None) == 5
        session.commit()
    waiting = _duty(engine, lake, tmp_path, kill_on=True, kill_buffer_period="P1D")
    assert waiting.kill() == {}  # marked unused just now: within the buffer period
    duty = _duty(
        engine, lake, tmp_path, kill_on=True, kill_buffer_period="PT0S", kill_duration_to_retain=""
    )
    assert duty.kill() == {"wiki": 5}
    left = {r[1] for r in _rows(engine)}
    assert left.isdisjoint(victims) and len(left) == 23
    gone = [f for f in files if "p0-" in f.name and int(f.name.split("-")[1]) < 5 * ROWS]
    assert len(gone) == 5 and not any(f.exists() for f in gone)
    table = catalog.load_table("druid.wiki")
    for snapshot in table.snapshots():  # none of the kept snapshots names a killed file
        table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    assert table.scan().to_arrow().num_rows == 23 * ROWS


def _rows(engine: Engine) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        return [(r[0], r[1]) for r in conn.execute(select(SegmentRow.path, SegmentRow.id))]


def test_orphan_files_go_once_old_and_nothing_named_is_touched(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    deep = tmp_path / "deep"
    _publish_wiki(engine, lake, deep, 4)
    with session_factory(engine)() as session:  # an unused segment's file: named by its row
        RetentionService(session, lake, utc_now()).mark_unused(
            "wiki", Selection(ids=["wiki_0_0"]), None
        )
        session.commit()
    day_ago = time.time() - 86_400
    planted = {
        "crashed publish": deep / "wiki" / "2026-11-22" / "v9" / "task-x" / "0.parquet",
        "lost swap": deep / "wiki" / "metadata" / "99999-lost.metadata.json",
    }
    for path in planted.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"left behind")
        os.utime(path, (day_ago, day_ago))
    young = deep / "wiki" / "metadata" / "staged-now.avro"
    young.write_bytes(b"a publish staging")
    before = {p for p in deep.rglob("*") if p.is_file()} - set(planted.values())
    old = {p for p in before if p != young}
    for path in old:  # every file the table or a row names is as old as the orphans
        os.utime(path, (day_ago, day_ago))

    removed = _duty(engine, lake, tmp_path, orphan_file_age="PT1H").remove_orphans()
    assert removed == {"wiki": 2}
    assert not any(path.exists() for path in planted.values())
    assert {p for p in deep.rglob("*") if p.is_file()} == before  # the rest, young or named
    table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.wiki")
    for snapshot in table.snapshots():
        table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    assert table.scan().to_arrow().num_rows == 3 * ROWS


def _compact_task(sessions: Any, config: Any, interval: Any, rows: list[Any]) -> CompactTask:
    """The compact task the leader's duty would launch, recorded as running."""
    task = compact_task(config, interval, rows, utc_now())
    with sessions() as session:
        now = utc_now()
        session.add(
            TaskRow(
                id=task.id,
                type="compact",
                datasource=task.dataSource,
                payload=task.to_json(),
                status="RUNNING",
                created_at=now,
                updated_at=now,
            )
        )
        session.commit()
    return task


def _written(
    deep: Path, task: CompactTask, per_file: int, run: str = "r1", short: int = 0
) -> list[SegmentDescriptor]:
    """What the task writes (tasks/compaction.py does it with Spark): its inputs' rows (but
    `short` of them) in files of `per_file` rows, in its run's folder."""
    table = pa.concat_tables([pq.read_table(path) for path in task.inputs.values()])
    table = table.slice(0, table.num_rows - short)
    folder = deep / "wiki" / "interval" / task.version / task.id / run
    folder.mkdir(parents=True)
    found = []
    for n, offset in enumerate(range(0, table.num_rows, per_file)):
        path = folder / f"{n}.parquet"
        part = table.slice(offset, per_file)
        pq.write_table(part, path)
        found.append(
            SegmentDescriptor(
                id=f"wiki_{task.version}_{n}",
                dataSource="wiki",
                intervalStart=task.interval[0],
                intervalEnd=task.interval[1],
                version=task.version,
                partitionNum=n,
                path=str(path),
                size=path.stat().st_size,
                numRows=part.num_rows,
                dimensions=task.dimensions,
                metrics=task.metrics,
            )
        )
    return found


def _commit(
    sessions: Any, lake: Lake, task: CompactTask, written: list[SegmentDescriptor], epoch: Any
) -> Any:
    action = ReplaceAction(
        supervisorId="wiki", dataSource="wiki", replaced=task.inputs, segments=written
    )
    with sessions() as session:
        row = session.get(TaskRow, task.id)
        result = CompactionCommit(session, lake, utc_now, epoch).commit(row, action)
        session.commit()
    return result


def test_a_compaction_replaces_its_files_or_commits_nothing(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    """Six files of one interval, given to a compact task: its commit from a deposed leader,
    one whose files hold other rows, and one whose input left the table meanwhile commit
    nothing; then its three files of at most 25 rows replace the six, its rows and metric sums
    those it replaced, and the commit asked again (its answer lost) is the same commit."""
    deep = tmp_path / "deep"
    _publish_wiki(engine, lake, deep, 6)
    sessions = session_factory(engine)
    config = parse_config(
        {
            "dataSource": "wiki",
            "skipOffsetFromLatest": "PT0S",
            "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 25}},
        }
    )
    catalog = SqlCatalog(CATALOG, uri=metadata_url)
    before = catalog.load_table("druid.wiki").current_snapshot()

    def awaiting() -> tuple[Any, list[Any]]:
        with sessions() as session:
            found = plan(session, lake, config).awaiting
            session.expunge_all()
        assert len(found) == 1
        return found[0]

    interval, rows = awaiting()
    assert len(rows) == 6
    task = _compact_task(sessions, config, interval, rows)
    written = _written(deep, task, 25)
    with pytest.raises(NotLeading):  # epoch 7: no lease says so
        _commit(sessions, lake, task, written, 7)
    # files that hold a row less (whatever the task says of them), or that are not its own
    short = _written(deep, task, 25, "r2", short=1)
    short[0] = short[0].model_copy(update={"numRows": short[0].numRows + 1})
    refused = _commit(sessions, lake, task, short, None)
    assert refused.outcome is PublishOutcome.FAILED and "rows" in refused.reason
    stray = [written[0].model_copy(update={"path": rows[0].path}), *written[1:]]
    refused = _commit(sessions, lake, task, stray, None)
    assert refused.outcome is PublishOutcome.FAILED and "new files" in refused.reason
    assert catalog.load_table("druid.wiki").current_snapshot() == before

    with sessions() as session:  # one of its inputs leaves the table before it commits
        RetentionService(session, lake, utc_now()).mark_unused(
            "wiki", Selection(ids=[rows[0].id]), None
        )
        session.commit()
    unused = catalog.load_table("druid.wiki").current_snapshot()
    refused = _commit(sessions, lake, task, written, None)
    assert refused.outcome is PublishOutcome.FAILED, refused
    assert catalog.load_table("druid.wiki").current_snapshot() == unused

    interval, rows = awaiting()  # the five still used, in a task of their own
    table = catalog.load_table("druid.wiki").scan().to_arrow()
    task = _compact_task(sessions, config, interval, rows)
    written = _written(deep, task, 25)
    assert _commit(sessions, lake, task, written, None).outcome is PublishOutcome.PUBLISHED
    after = catalog.load_table("druid.wiki")
    compacted = after.scan().to_arrow()
    assert sorted(compacted.column("word").to_pylist()) == sorted(table.column("word").to_pylist())
    assert sum(compacted.column("count").to_pylist()) == sum(table.column("count").to_pylist())
    assert [f.file.record_count for f in after.scan().plan_files()] == [25, 25]
    assert after.current_snapshot().summary["sluicegate.task"] == task.id  # type: ignore[union-attr]
    again = _commit(sessions, lake, task, written, None)
    assert again.outcome is PublishOutcome.PUBLISHED and "earlier attempt" in again.reason
    assert catalog.load_table("druid.wiki").current_snapshot() == after.current_snapshot()
    with sessions() as session:
        assert plan(session, lake, config).awaiting == []
        assert set(TaskRepository(session).compacted_away("wiki")) == {r.id for r in rows}
        # the task never heard its commit landed and ended failed: the compaction is done
        lost = TaskReport(status=TaskState.FAILED, errorMsg="no answer")
        TaskLife(session, utc_now, None).record_exits([Exited(task.id, 1, lost)])  # type: ignore[arg-type]
        ended = session.get(TaskRow, task.id)
        assert ended is not None and ended.status == "SUCCESS"
        assert ended.report["replaced"] == task.inputs


def test_a_replace_pyiceberg_refuses_gives_up_and_commits_nothing(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyiceberg checks that each file an overwrite deletes is live in its parent snapshot. When
    it refuses a file the replace's own look found (the soak of 2026-12-03 saw it twice; here
    that look is handed the manifests of a snapshot from before a drop), the replace gives up
    as for a file that left (Replaced: the compaction's FAILED), not an unexpected error, and
    the table is as it was."""
    deep = tmp_path / "deep"
    _publish_wiki(engine, lake, deep, 2)
    sessions = session_factory(engine)
    with sessions() as session:
        paths = set(session.scalars(select(SegmentRow.path)))
    catalog = SqlCatalog(CATALOG, uri=metadata_url)
    both = catalog.load_table("druid.wiki")
    with sessions() as session:
        RetentionService(session, lake, utc_now()).mark_unused(
            "wiki", Selection(ids=["wiki_0_0"]), None
        )
        session.commit()
    dropped = catalog.load_table("druid.wiki").current_snapshot()
    assert dropped != both.current_snapshot()
    stale = append.manifests_of(both.io, both.current_snapshot())
    monkeypatch.setattr(rewrite, "manifests_of", lambda io, snapshot: stale)
    nothing = published("wiki", [], {"sluicegate.operation": "compact"})
    with sessions() as session, pytest.raises(rewrite.Replaced, match="refused"):
        rewrite.replace(lake, session, nothing, paths, {})
    assert catalog.load_table("druid.wiki").current_snapshot() == dropped


def test_a_kill_that_raced_a_mark_used_deletes_nothing(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kill read a segment as unused; a markUsed put it back in the table before the kill
    wrote: the kill is a retry (Raced), its row and its file stay, the table reads it."""
    deep = tmp_path / "deep"
    _publish_wiki(engine, lake, deep, 2)
    sessions = session_factory(engine)
    with sessions() as session:
        RetentionService(session, lake, utc_now()).mark_unused(
            "wiki", Selection(ids=["wiki_0_0"]), None
        )
        session.commit()
    with sessions() as session:  # what the kill reads, before the markUsed
        stale = SegmentStates(session).of("wiki", False)
        stale_held = live_files(lake, session, "wiki")
        session.expunge_all()
    assert [r.id for r in stale] == ["wiki_0_0"]
    with sessions() as session:
        RetentionService(session, lake, utc_now()).mark_used(
            "wiki", Selection(ids=["wiki_0_0"]), None
        )
        session.commit()
    monkeypatch.setattr(SegmentStates, "of", lambda *_args, **_kw: stale)
    reads = iter([stale_held])  # the kill's first look at the table is from before too
    monkeypatch.setattr(
        kill_module, "live_files", lambda *args: next(reads, None) or live_files(*args)
    )
    everything = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))
    with sessions() as session, pytest.raises(Raced):
        KillService(session, lake, utc_now()).kill(Kill("k", "wiki", everything), None)
    assert Path(stale[0].path).exists()
    assert len(_rows(engine)) == 2
    table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.wiki")
    assert table.scan().to_arrow().num_rows == 2 * ROWS


class _LostHostRunner:
    """A task host that is gone for the first launch (as one SIGKILLed a moment before the
    leader noticed), then takes tasks."""

    def __init__(self) -> None:
        self.launched: list[str] = []
        self.gone = True

    def launch(self, task: Any) -> Launched:
        if self.gone:
            self.gone = False
            raise ConnectionRefusedError("task host 127.0.0.1:1: ConnectError")
        self.launched.append(task.id)
        return Launched(host="127.0.0.1", port=1, log_path="", token="t")


def test_an_interval_whose_compact_task_was_lost_is_compacted_after_a_short_backoff(
    engine: Engine, lake: Lake, tmp_path: Path
) -> None:
    """A compact task that could not start (its task host was just lost) leaves its interval
    FIRST_BACKOFF_S, not ten minutes: with event days a minute apart, newer intervals would
    otherwise keep coming and the lost one would stay uncompacted until the drop rule."""
    deep = tmp_path / "deep"
    _publish_wiki(engine, lake, deep, 3)
    sessions = session_factory(engine)
    with sessions() as session:
        config = {"dataSource": "wiki", "skipOffsetFromLatest": "PT0S"}
        CompactionConfigs(session).put("wiki", config, utc_now())
        session.commit()
    now = [utc_now()]
    runner = _LostHostRunner()
    duty = CompactionDuty(sessions, lake, Unfenced(), lambda: now[0], runner, Unsettled(), 10)

    lost = duty.compact_all()["wiki"]  # its launch failed: recorded FAILED
    with sessions() as session:
        row = session.get(TaskRow, lost)
        assert row is not None and row.status == "FAILED"
        assert "could not be started" in (row.error_msg or "")
        failed = TaskRepository(session).failed_compactions("wiki", now[0] - timedelta(hours=1))
    assert len(failed) == 1 and len(next(iter(failed.values()))) == 1
    now[0] += timedelta(seconds=FIRST_BACKOFF_S - 1)
    assert duty.compact_all() == {} and runner.launched == []  # within its backoff
    now[0] += timedelta(seconds=1)
    assert list(duty.compact_all()) == ["wiki"] and len(runner.launched) == 1


def _day_action(deep: Path, day: str, start: int) -> Any:
    """A publish of ROWS records of one day (offsets `start` on), a day segment's file."""
    act = action(deep, 0, start)
    path = Path(act.segments[0].path)
    stamp = int(datetime.fromisoformat(f"{day}T10:00:00+00:00").timestamp() * 1_000_000)
    rows = pq.read_table(path)
    times = pa.array([stamp + i for i in range(ROWS)], pa.timestamp("us", tz="UTC"))
    pq.write_table(rows.set_column(0, "__time", times), path, compression="zstd")
    end = (datetime.fromisoformat(day) + timedelta(days=1)).date().isoformat()
    segment = act.segments[0].model_copy(
        update={
            "id": f"wiki_{day}_{start}",
            "intervalStart": f"{day}T00:00:00+00:00",
            "intervalEnd": f"{end}T00:00:00+00:00",
            "size": path.stat().st_size,
        }
    )
    return act.model_copy(update={"segments": [segment]})


def test_a_months_day_files_become_one_file_of_a_month_partitioning(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    """Compaction into MONTH segments of a table whose pyiceberg retries are on (made before
    they were turned off): they are turned off first; the month's file is of a month
    partitioning and the table's own stays the day's; a scan of one day of the month reads
    that day's rows from it; a late day file is compacted into the month again without a
    third spec; a file of another interval than the task's is refused; the month segment
    marked unused and used again comes back under its month partitioning."""
    deep = tmp_path / "deep"
    days = ["2026-10-03", "2026-10-10", "2026-11-20"]
    for n, day in enumerate(days):
        act = _day_action(deep, day, n * ROWS)
        assert publish(engine, lake, act, f"d{n}").outcome is PublishOutcome.PUBLISHED
    catalog = SqlCatalog(CATALOG, uri=metadata_url)
    old = catalog.load_table("druid.wiki")
    old.transaction().set_properties({"commit.retry.num-retries": "4"}).commit_transaction()
    sessions = session_factory(engine)
    raw = {"dataSource": "wiki", "granularitySpec": {"segmentGranularity": "month"}}
    config = parse_config(raw)

    def compact(expected_files: int) -> CompactTask:
        with sessions() as session:
            found = plan(session, lake, config)
            session.expunge_all()
        [(interval, rows)] = found.awaiting
        assert [i for i, _ in found.skipped] == [
            (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
        ]
        assert interval == (datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
        assert len(rows) == expected_files
        task = _compact_task(sessions, config, interval, rows)
        if expected_files == 2:  # files of a day interval, not the task's month
            daily = [
                s.model_copy(update={"intervalEnd": "2026-10-02T00:00:00+00:00"})
                for s in _written(deep, task, 100, "r0")
            ]
            refused = _commit(sessions, lake, task, daily, None)
            assert refused.outcome is PublishOutcome.FAILED and "interval" in refused.reason
        written = _written(deep, task, 100)
        assert _commit(sessions, lake, task, written, None).outcome is PublishOutcome.PUBLISHED
        return task

    def october() -> list[tuple[str, int]]:
        table = catalog.load_table("druid.wiki")
        scan = table.scan(row_filter="__time < '2026-11-01T00:00:00+00:00'")
        files = scan.plan_files()
        return sorted(
            (str(table.specs()[f.file.spec_id].fields[0].transform), f.file.record_count)
            for f in files
        )

    compact(2)
    table = catalog.load_table("druid.wiki")
    assert table.metadata.properties["commit.retry.num-retries"] == "0"
    assert [str(f.transform) for f in table.spec().fields] == ["day"]
    assert october() == [("month", 2 * ROWS)]
    one_day = "__time >= '2026-10-10T00:00:00+00:00' and __time < '2026-10-11T00:00:00+00:00'"
    read = table.scan(row_filter=one_day).to_arrow()
    assert sorted(read.column("word").to_pylist()) == [f"p0-{ROWS + i}" for i in range(ROWS)]

    late = _day_action(deep, "2026-10-25", 3 * ROWS)  # a late record's day, after compaction
    assert publish(engine, lake, late, "late").outcome is PublishOutcome.PUBLISHED
    assert october() == [("day", ROWS), ("month", 2 * ROWS)]
    task = compact(2)  # the month's file and the late day's
    table = catalog.load_table("druid.wiki")
    assert october() == [("month", 3 * ROWS)]
    assert len(table.specs()) == 2 and [str(f.transform) for f in table.spec().fields] == ["day"]
    everything = table.scan().to_arrow().column("word").to_pylist()
    assert sorted(everything) == sorted(f"p0-{i}" for i in range(4 * ROWS))

    with sessions() as session:  # the month segment out of the table, and back
        [month_id] = [s.id for s in _written_ids(session, task)]
        RetentionService(session, lake, utc_now()).mark_unused(
            "wiki", Selection(ids=[month_id]), None
        )
        session.commit()
    assert october() == []
    with sessions() as session:
        RetentionService(session, lake, utc_now()).mark_used(
            "wiki", Selection(ids=[month_id]), None
        )
        session.commit()
    table = catalog.load_table("druid.wiki")
    assert october() == [("month", 3 * ROWS)]
    assert [str(f.transform) for f in table.spec().fields] == ["day"]
    assert len(table.specs()) == 2


def _written_ids(session: Any, task: CompactTask) -> list[SegmentRow]:
    """The segment rows the compact task committed."""
    row = session.get(TaskRow, task.id)
    return list(
        session.scalars(select(SegmentRow).where(SegmentRow.id.in_(row.report["segments"])))
    )


def test_a_publish_after_a_drop_carries_no_manifest_of_only_deleted_files(
    engine: Engine, lake: Lake, metadata_url: str, tmp_path: Path
) -> None:
    """A drop's snapshot records the files it removed in a manifest of DELETED entries; the
    next publish's snapshot keeps only manifests with a live file, as Iceberg's appends do,
    and reads the rows still used."""
    deep = tmp_path / "deep"
    for start in (0, ROWS, 2 * ROWS):
        assert publish(engine, lake, action(deep, 0, start), f"w{start}").outcome is (
            PublishOutcome.PUBLISHED
        )
    sessions = session_factory(engine)
    with sessions() as session:
        RetentionService(session, lake, utc_now()).mark_unused(
            "wiki", Selection(ids=["wiki_0_0", f"wiki_0_{ROWS}"]), None
        )
        session.commit()
    catalog = SqlCatalog(CATALOG, uri=metadata_url)
    dropped = catalog.load_table("druid.wiki")

    def manifests(table: Any) -> list[Any]:
        return list(table.current_snapshot().manifests(table.io))

    assert any(  # the drop's own record of what it removed
        not (m.has_added_files() or m.has_existing_files()) for m in manifests(dropped)
    )
    act = action(deep, 0, 3 * ROWS)
    act.startMetadata.partitionSequenceNumberMap["0"] = 3 * ROWS  # type: ignore[union-attr]
    assert publish(engine, lake, act, "w30").outcome is PublishOutcome.PUBLISHED
    after = catalog.load_table("druid.wiki")
    assert manifests(after) and all(
        m.has_added_files() or m.has_existing_files() for m in manifests(after)
    )
    words = sorted(after.scan().to_arrow().column("word").to_pylist())
    assert words == sorted(f"p0-{i}" for i in range(2 * ROWS, 4 * ROWS))
