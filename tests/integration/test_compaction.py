"""Compaction on the real stack (supervisor/services/compaction.py): a supervisor publishing
an interval's small files every couple of seconds while the leader compacts that interval;
every record is in the table once before, during and after (pyiceberg's SqlCatalog on the
metadata DB), the interval ends in few files, and Druid's status routes say so. The
compaction is Druid's compaction supervisor (`autocompact`), submitted suspended and then
resumed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic, produce
from supervisor.lake.tables import CATALOG, SUMMARY_OPERATION
from supervisor.testkit.readers import iceberg_sql
from supervisor.testkit.service import overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec

BASE = "/druid/indexer/v1/supervisor"
COORD = "/druid/coordinator/v1"
BATCHES, PER_BATCH = 30, 10


def _words(metadata_url: str, datasource: str = "comp") -> list[str]:
    catalog = SqlCatalog(CATALOG, uri=metadata_url)
    try:
        table = catalog.load_table(f"druid.{datasource}")
    except NoSuchTableError:  # not published yet
        return []
    return list(table.scan().to_arrow().column("word").to_pylist())


def _files(metadata_url: str, datasource: str = "comp") -> int:
    try:
        table = SqlCatalog(CATALOG, uri=metadata_url).load_table(f"druid.{datasource}")
    except NoSuchTableError:
        return 0
    return len(list(table.scan().plan_files()))


@pytest.mark.kafka
@pytest.mark.spark
def test_an_interval_is_compacted_while_a_supervisor_appends_to_it(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path, metadata_url: str
) -> None:
    topic = f"comp-{tmp_path.name[-12:].replace('_', '-')}"
    create_topic(kafka.bootstrap_servers, topic, 1)
    spec = words_spec("comp", topic, kafka.bootstrap_servers)
    spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] = False
    spec["spec"]["tuningConfig"] = {"type": "kafka", "intermediateHandoffPeriod": "PT2S"}
    produced = 0

    def produce_batches() -> None:
        nonlocal produced
        for batch in range(BATCHES):
            records = [
                (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": f"w{batch}-{i}"}).encode())
                for i in range(PER_BATCH)
            ]
            produce(kafka.bootstrap_servers, topic, records)
            produced += PER_BATCH
            time.sleep(0.5)

    with overlord_with_tasks(
        tmp_path, jar_cache, "local[1]", metadata_url=metadata_url, coordinator_period_s=0.5
    ) as (_service, api):
        assert api.post(BASE, json=spec).status_code == 200
        producer = threading.Thread(target=produce_batches, daemon=True)
        producer.start()
        wait_for(lambda: _files(metadata_url) >= 3, 240, "a few small files published")
        config = {
            "dataSource": "comp",
            "skipOffsetFromLatest": "PT0S",
            "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 100_000}},
        }
        bad = api.post(f"{COORD}/config/compaction", json={**config, "skipOffsetFromLatest": "1D"})
        assert bad.status_code == 400 and "skipOffsetFromLatest" in bad.text, bad.text
        # Druid's compaction supervisor, submitted suspended: nothing is compacted until resumed
        compacting = {"type": "autocompact", "spec": config, "suspended": True}
        assert api.post(BASE, json=compacting).json() == {"id": "autocompact__comp"}
        assert api.get(f"{COORD}/config/compaction/comp").json() == config
        time.sleep(2)  # four of the leader's compaction runs
        assert api.get("/druid/indexer/v1/tasks", params={"type": "compact"}).json() == []
        assert _awaiting(api) >= 1
        assert api.post(f"{BASE}/autocompact__comp/resume").status_code == 200

        # while it appends and the leader compacts: never a record twice, never one lost
        seen = 0
        while producer.is_alive():
            words = _words(metadata_url)
            assert len(words) == len(set(words)), "a record twice"
            assert len(words) >= seen, "a record lost"
            seen = len(words)
            time.sleep(0.3)
        producer.join()
        wait_for(lambda: len(_words(metadata_url)) == produced, 120, "every record published")
        wait_for(lambda: _awaiting(api) == 0, 120, "nothing awaiting compaction")
        words = _words(metadata_url)
        assert sorted(words) == sorted(
            f"w{b}-{i}" for b in range(BATCHES) for i in range(PER_BATCH)
        )
        status = api.get(f"{COORD}/compaction/status", params={"dataSource": "comp"}).json()
        [latest] = status["latestStatus"]
        assert latest["intervalCountCompacted"] == 1 and latest["segmentCountCompacted"] <= 2
        progress = api.get(f"{COORD}/compaction/progress", params={"dataSource": "comp"})
        assert progress.json() == {"remainingSegmentSize": 0}
        compacts = wait_for(lambda: _compacts_ended(api), 60, "the compact tasks' ends")
        assert all(t["statusCode"] == "SUCCESS" for t in compacts), compacts
        table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.comp")
        operations = [s.summary.get(SUMMARY_OPERATION) for s in table.snapshots() if s.summary]
        assert operations.count("compact") >= 1
        assert api.delete(f"{COORD}/config/compaction/comp").status_code == 200
        assert api.get(f"{COORD}/config/compaction/comp").status_code == 404
        assert api.get(BASE).json() == ["comp"]  # the compaction supervisor went with it


MONTH_DAYS = ("2026-10-03", "2026-10-10", "2026-10-17")  # closed: compacted into October


def _produce_days(bootstrap: str, topic: str, days: tuple[str, ...], tag: str) -> list[str]:
    """Ten records a day, each day a batch of its own (and so a file of its own)."""
    words = []
    for k, day in enumerate(days):
        if k:
            time.sleep(2.5)  # past the handoff period: this day is another publish
        batch = [f"{tag}{day}-{i}" for i in range(10)]
        records = [
            (None, json.dumps({"ts": f"{day}T10:00:00Z", "word": word}).encode()) for word in batch
        ]
        produce(bootstrap, topic, records)
        words += batch
    return words


def _october(metadata_url: str) -> list[tuple[int, str, int]]:
    """The table's files of October: (spec id, partitioning, rows) of each."""
    table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.months")
    found = []
    for task in table.scan(row_filter="__time < '2026-11-01T00:00:00+00:00'").plan_files():
        spec = table.specs()[task.file.spec_id]
        found.append((task.file.spec_id, str(spec.fields[0].transform), task.file.record_count))
    return sorted(found)


@pytest.mark.kafka
@pytest.mark.spark
# SQLite only: on PostgreSQL the same commit (a month's files under a spec of their own) is
# test_table_maintenance's month test, and the task's Spark run does not depend on the DB
@pytest.mark.parametrize("metadata_url", ["sqlite"], indirect=True)
def test_a_months_day_segments_are_compacted_into_one_month_segment(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path, metadata_url: str
) -> None:
    """A day-granularity supervisor and a compaction config of MONTH segmentGranularity: the
    closed month's day files become one file of a month partitioning (the table's own stays
    the day's, which the streaming publishes keep using), a month segment; a late record of
    that month lands as a day file and is compacted into the month again. pyiceberg and
    Spark's Iceberg runtime read every record once; the month still open is not compacted."""
    topic = f"months-{tmp_path.name[-12:].replace('_', '-')}"
    create_topic(kafka.bootstrap_servers, topic, 1)
    spec = words_spec("months", topic, kafka.bootstrap_servers)
    spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] = False
    spec["spec"]["tuningConfig"] = {"type": "kafka", "intermediateHandoffPeriod": "PT2S"}
    bootstrap = kafka.bootstrap_servers
    with overlord_with_tasks(
        tmp_path, jar_cache, "local[1]", metadata_url=metadata_url, coordinator_period_s=0.5
    ) as (_service, api):
        assert api.post(BASE, json=spec).status_code == 200
        words = _produce_days(bootstrap, topic, (*MONTH_DAYS, "2026-11-20", "2026-11-21"), "")
        wait_for(lambda: len(_words(metadata_url, "months")) == 50, 180, "every day published")
        assert [transform for _, transform, _ in _october(metadata_url)] == ["day"] * 3

        config = {
            "dataSource": "months",
            "skipOffsetFromLatest": "P1D",
            "granularitySpec": {"segmentGranularity": "MONTH"},
        }
        for wrong, field in (
            ({"segmentGranularity": "FORTNIGHT"}, "granularitySpec.segmentGranularity"),
            ({"segmentGranularity": "MONTH", "queryGranularity": "HOUR"}, "queryGranularity"),
            ({"segmentGranularity": "MONTH", "intervals": []}, "granularitySpec.intervals"),
        ):
            bad = api.post(f"{COORD}/config/compaction", json={**config, "granularitySpec": wrong})
            assert bad.status_code == 400 and field in bad.text, bad.text
        assert api.post(f"{COORD}/config/compaction", json=config).status_code == 200

        def october_compacted(rows: int) -> list[tuple[int, str, int]] | None:
            found = _october(metadata_url)
            return found if [(t, r) for _, t, r in found] == [("month", rows)] else None

        [(month_spec, _, _)] = wait_for(lambda: october_compacted(30), 120, "October compacted")
        table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.months")
        assert [str(f.transform) for f in table.spec().fields] == ["day"]
        assert month_spec != table.spec().spec_id
        segments = api.get(f"{COORD}/metadata/datasources/months/segments", params={"full": ""})
        intervals = sorted(s["interval"] for s in segments.json())
        assert intervals[0].startswith("2026-10-01T00:00:00.000Z/2026-11-01T00:00:00.000Z")
        assert len(intervals) == 3  # October's one, and the two November days, not compacted
        status = api.get(f"{COORD}/compaction/status", params={"dataSource": "months"}).json()
        [latest] = status["latestStatus"]
        assert latest["intervalCountCompacted"] == 1 and latest["intervalCountSkipped"] == 1

        # a late record of October: a day file of the day partitioning, then October again
        words += _produce_days(bootstrap, topic, ("2026-10-25",), "late")
        wait_for(lambda: october_compacted(40), 120, "October compacted with its late day")
        read = _words(metadata_url, "months")
        assert sorted(read) == sorted(words)
        # one day of the month, read through the month file's partition (pruned by it), and
        # every record once
        query = (
            "SELECT 'a day' AS part, COUNT(*) AS n FROM months"
            " WHERE __time >= TIMESTAMP '2026-10-10T00:00:00Z'"
            " AND __time < TIMESTAMP '2026-10-11T00:00:00Z'"
            " UNION ALL SELECT 'October', COUNT(DISTINCT word) FROM months"
            " WHERE __time < TIMESTAMP '2026-11-01T00:00:00Z'"
            " UNION ALL SELECT 'all', COUNT(DISTINCT word) FROM months"
        )
        spark = iceberg_sql(query, metadata_url, tmp_path / "deep", jar_cache)
        assert spark.returncode == 0, spark.stderr[-3000:]
        assert sorted(json.loads(spark.stdout), key=lambda row: row["n"]) == [
            {"part": "a day", "n": 10},
            {"part": "October", "n": 40},
            {"part": "all", "n": 60},
        ]


def _compacts_ended(api: httpx.Client) -> list[dict[str, object]] | None:
    """The compact tasks, once there are some and none runs."""
    found = api.get("/druid/indexer/v1/tasks", params={"type": "compact"}).json()
    return found if found and all(t["statusCode"] != "RUNNING" for t in found) else None


def _awaiting(api: httpx.Client, datasource: str = "comp") -> int:
    status = api.get(f"{COORD}/compaction/status", params={"dataSource": datasource}).json()
    return int(status["latestStatus"][0]["intervalCountAwaitingCompaction"])


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.long
def test_a_compact_task_runs_as_a_task_process_of_its_own(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    """The `process` runtime: the compact task is a `python -m tasks` process, as the
    indexing task is."""
    topic = f"pcomp-{tmp_path.name[-12:].replace('_', '-')}"
    create_topic(kafka.bootstrap_servers, topic, 1)
    spec = words_spec("pcomp", topic, kafka.bootstrap_servers)
    spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] = False
    spec["spec"]["tuningConfig"] = {"type": "kafka", "intermediateHandoffPeriod": "PT2S"}
    metadata_url = f"sqlite:///{tmp_path / 'meta.db'}"
    words = [f"p{batch}-{i}" for batch in range(3) for i in range(5)]
    with overlord_with_tasks(
        tmp_path, jar_cache, "local[1]", task_runtime="process", coordinator_period_s=0.5
    ) as (_service, api):
        assert api.post(BASE, json=spec).status_code == 200
        for batch in range(3):
            records = [
                (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": w}).encode())
                for w in words[batch * 5 : batch * 5 + 5]
            ]
            produce(kafka.bootstrap_servers, topic, records)
            wait_for(
                lambda b=batch: len(_words(metadata_url, "pcomp")) == 5 * (b + 1),
                240,
                f"batch {batch} published",
            )
        config = {"dataSource": "pcomp", "skipOffsetFromLatest": "PT0S"}
        assert api.post(f"{COORD}/config/compaction", json=config).status_code == 200
        wait_for(lambda: _awaiting(api, "pcomp") == 0, 240, "nothing awaiting compaction")
        [task] = wait_for(lambda: _compacts_ended(api), 60, "the compact task's end")
        assert task["statusCode"] == "SUCCESS", task
        assert task["location"]["port"] > 0  # it served (404s) on a port of its own
        assert sorted(_words(metadata_url, "pcomp")) == sorted(words)
        assert _files(metadata_url, "pcomp") == 1
        report = api.get(f"/druid/indexer/v1/task/{task['id']}/reports").json()
        assert len(report["ingestionStatsAndErrors"]["payload"]["segments"]) == 1
