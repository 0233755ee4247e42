"""Retention on the real stack (supervisor/services/retention.py): Druid's rules applied by the
leader, segments marked unused and used again, a datasource dropped; what is dropped leaves
every reader at once (pyiceberg's SqlCatalog on the metadata DB, the segments API, Spark with
Iceberg's runtime), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic, produce
from supervisor.lake.tables import CATALOG, SUMMARY_OPERATION
from supervisor.testkit.readers import iceberg_sql
from supervisor.testkit.service import overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec

BASE = "/druid/indexer/v1/supervisor"
COORD = "/druid/coordinator/v1"
TODAY = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
DAYS_AGO = (20, 10, 0)  # a day of records each, ten records a day


def _day(ago: int) -> str:
    start = TODAY - timedelta(days=ago)
    return f"{start.isoformat()}/{(start + timedelta(days=1)).isoformat()}"


def _records() -> list[tuple[None, bytes]]:
    records = []
    for ago in DAYS_AGO:
        moment = (TODAY - timedelta(days=ago) + timedelta(hours=1)).isoformat()
        for i in range(10):
            records.append((None, json.dumps({"ts": moment, "word": f"d{ago}-{i}"}).encode()))
    return records


def _words(metadata_url: str) -> list[str]:
    """What pyiceberg's own SqlCatalog reads of the table now."""
    table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.kept")
    return sorted(table.scan().to_arrow().column("word").to_pylist())


def _days(words: list[str]) -> set[int]:
    return {int(word[1:].split("-")[0]) for word in words}


def _read(api: httpx.Client) -> int:
    tasks = api.get(f"{BASE}/kept/status").json()["payload"]["activeTasks"]
    return sum(sum((t.get("currentOffsets") or {}).values()) for t in tasks)


def _segments(api: httpx.Client) -> list[dict[str, object]]:
    answer = api.get(f"{COORD}/metadata/datasources/kept/segments?full")
    return list(answer.json()) if answer.status_code == 200 else []


@pytest.mark.kafka
@pytest.mark.spark
def test_rules_and_marks_take_data_out_of_every_reader(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path, metadata_url: str
) -> None:
    topic = f"kept-{tmp_path.name[-12:].replace('_', '-')}"
    create_topic(kafka.bootstrap_servers, topic, 1)
    produce(kafka.bootstrap_servers, topic, _records())
    spec = words_spec("kept", topic, kafka.bootstrap_servers)
    spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] = False
    with overlord_with_tasks(
        tmp_path, jar_cache, "local[1]", metadata_url=metadata_url, coordinator_period_s=0.5
    ) as (_service, api):
        assert api.post(BASE, json=spec).status_code == 200
        wait_for(lambda: _read(api) == 30, 240, "the task to read the 30 records")
        assert api.post(f"{BASE}/kept/taskGroups/handoff", json={"taskGroupIds": [0]}).is_success
        wait_for(lambda: len(_segments(api)) == 3, 240, "three days published")
        assert _days(_words(metadata_url)) == {20, 10, 0}

        # rules: bad ones are refused with the field; the defaults follow a datasource's own
        bad = api.post(f"{COORD}/rules/kept", json=[{"type": "dropByPeriod", "period": "1D"}])
        assert bad.status_code == 400 and "rules[0].period" in bad.text, bad.text
        assert api.get(f"{COORD}/rules/kept").json() == []
        assert api.get(f"{COORD}/rules").json()["_default"][0]["type"] == "loadForever"
        rules = [{"type": "loadByPeriod", "period": "P15D"}, {"type": "dropForever"}]
        assert api.post(f"{COORD}/rules/kept", json=rules).status_code == 200
        assert api.get(f"{COORD}/rules/kept").json() == rules
        assert api.get(f"{COORD}/rules/kept?full").json()[2]["type"] == "loadForever"

        # the leader applies them: the day 20 days ago leaves the table and the segments API
        wait_for(lambda: _days(_words(metadata_url)) == {10, 0}, 60, "the old day dropped")
        assert len(_segments(api)) == 2
        table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.kept")
        assert table.current_snapshot().summary[SUMMARY_OPERATION] == "retention"  # type: ignore[union-attr]

        # marked unused by hand, and used again
        marked = api.post(f"{COORD}/datasources/kept/markUnused", json={"interval": _day(10)})
        assert marked.json() == {"numChangedSegments": 1}, marked.text
        assert _days(_words(metadata_url)) == {0}
        again = api.post(f"{COORD}/datasources/kept/markUnused", json={"interval": _day(10)})
        assert again.json() == {"numChangedSegments": 0}
        used = api.post(f"{COORD}/datasources/kept/markUsed", json={"interval": _day(10)})
        assert used.json() == {"numChangedSegments": 1}, used.text
        assert _words(metadata_url) == sorted(f"d{ago}-{i}" for ago in (10, 0) for i in range(10))
        both = api.post(
            f"{COORD}/datasources/kept/markUnused", json={"interval": _day(10), "segmentIds": ["x"]}
        )
        assert both.status_code == 400 and "interval" in both.text

        # Spark with Iceberg's runtime reads what the table holds now
        query = "SELECT COUNT(*) AS n, MIN(word) AS first FROM kept"
        spark = iceberg_sql(query, metadata_url, tmp_path / "deep", jar_cache)
        assert spark.returncode == 0, spark.stderr[-3000:]
        assert json.loads(spark.stdout) == [{"n": 20, "first": "d0-0"}]

        # a kill deletes the dropped day's file for good, and nothing used
        deep = tmp_path / "deep" / "kept"
        assert len(_parquet(deep)) == 3
        everything = f"{_day(30).split('/')[0]}/{_day(-1).split('/')[1]}"
        killed = _kill(api, everything)
        assert killed == [s for s in killed if s.startswith("kept_")] and len(killed) == 1
        assert len(_parquet(deep)) == 2
        assert _days(_words(metadata_url)) == {10, 0}
        revived = api.post(f"{COORD}/datasources/kept/markUsed", json={"interval": everything})
        assert revived.json() == {"numChangedSegments": 0}  # killed: nothing left to mark
        # every snapshot kept still reads (the ones holding the killed file were expired)
        table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.kept")
        for snapshot in table.snapshots():
            table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()

        # the whole datasource dropped: no reader sees any of it; killed, no file is left
        dropped = api.delete(f"{COORD}/datasources/kept")
        assert dropped.json() == {"numChangedSegments": 2}, dropped.text
        assert _words(metadata_url) == []
        assert api.get(f"{COORD}/metadata/datasources").json() == []
        assert api.get(f"{COORD}/metadata/datasources/kept/segments").status_code == 404
        assert len(_parquet(deep)) == 2  # unused, not killed: its files stay
        path = everything.replace("/", "_")
        answer = api.delete(f"{COORD}/datasources/kept/intervals/{path}")
        assert answer.status_code == 200, answer.text
        status = api.get(f"/druid/indexer/v1/task/{answer.json()['task']}/status").json()
        assert status["status"]["status"] == "SUCCESS" and status["status"]["type"] == "kill"
        assert _parquet(deep) == []
        bad = api.post("/druid/indexer/v1/task", json={"type": "kill", "dataSource": "kept"})
        assert bad.status_code == 400 and "interval" in bad.text, bad.text


def _parquet(root: Path) -> list[Path]:
    return sorted(root.rglob("*.parquet"))


def _kill(api: httpx.Client, interval: str) -> list[str]:
    """A kill task of the interval, run; the segments it deleted (from its report)."""
    task = {"type": "kill", "dataSource": "kept", "interval": interval}
    answer = api.post("/druid/indexer/v1/task", json=task)
    assert answer.status_code == 200, answer.text
    report = api.get(f"/druid/indexer/v1/task/{answer.json()['task']}/reports").json()
    return list(report["ingestionStatsAndErrors"]["payload"]["segments"])
