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
