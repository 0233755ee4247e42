"""Published as Apache Iceberg (issue 44), read by real readers on the real stack: a
supervisor's publishes are snapshots of the datasource's table, catalogued in the metadata DB
(SQLite and PostgreSQL), and pyiceberg's own SqlCatalog, pointed at that database, reads every
record once; the latest snapshot's summary holds the supervisor's committed offsets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import select

from supervisor.db.models import CommittedOffsetsRow, SegmentRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic, produce
from supervisor.lake.tables import CATALOG, SUMMARY_COMMITTED, SUMMARY_SUPERVISOR
from supervisor.testkit.readers import iceberg_sql
from supervisor.testkit.service import db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec

BASE = "/druid/indexer/v1/supervisor"


def _records(count: int, start: int = 0) -> list[tuple[None, bytes]]:
    """Records a day apart over three days, each a distinct word (n0, n1, ...)."""
    return [
        (None, json.dumps({"ts": f"2026-11-2{i % 3}T10:00:00Z", "word": f"n{i}"}).encode())
        for i in range(start, start + count)
    ]


@pytest.mark.kafka
@pytest.mark.spark
def test_a_supervisors_publishes_are_snapshots_every_reader_reads_once(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path, metadata_url: str
) -> None:
    """replicas 2, one replica killed mid-read, two handoffs: pyiceberg's SqlCatalog and
    Spark with Iceberg's runtime (JdbcCatalog) each read every record once."""
    topic = f"ice-{tmp_path.name[-12:].replace('_', '-')}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    produce(kafka.bootstrap_servers, topic, _records(300))
    spec = words_spec("ice", topic, kafka.bootstrap_servers)
    spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] = False
    spec["spec"]["ioConfig"]["replicas"] = 2
    with overlord_with_tasks(tmp_path, jar_cache, "local[1]", metadata_url=metadata_url) as (
        service,
        api,
    ):
        assert api.post(BASE, json=spec).status_code == 200
        reading = wait_for(lambda: _reading(api), 240, "both replicas reading")
        victim = reading[0]
        assert api.post(f"/druid/indexer/v1/task/{victim}/shutdown").is_success
        wait_for(lambda: _read(api, victim) == 300, 240, "both replicas (one new) at 300")
        api.post(f"{BASE}/ice/taskGroups/handoff", json={"taskGroupIds": [0]})
        wait_for(lambda: _published(service) == 300, 240, "300 rows published")
        produce(kafka.bootstrap_servers, topic, _records(100, 300))
        wait_for(lambda: _read(api) == 400, 240, "the successors reading the next 100")
        api.post(f"{BASE}/ice/taskGroups/handoff", json={"taskGroupIds": [0]})
        wait_for(lambda: _published(service) == 400, 240, "400 rows published")
        [committed] = db_rows(service, select(CommittedOffsetsRow.offsets))

    table = SqlCatalog(CATALOG, uri=metadata_url).load_table("druid.ice")
    rows = table.scan().to_arrow()
    words = sorted(rows.column("word").to_pylist(), key=lambda w: int(w[1:]))
    assert words == [f"n{i}" for i in range(400)]  # every record once
    assert str(rows.schema.field("__time").type) == "timestamp[us, tz=UTC]"
    # three days of __time: three partitions of day(__time)
    assert [str(f.transform) for f in table.spec().fields] == ["day"]
    assert len({task.file.partition[0] for task in table.scan().plan_files()}) == 3
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary[SUMMARY_SUPERVISOR] == "ice"
    assert json.loads(summary[SUMMARY_COMMITTED]) == committed[0]
    assert sum(committed[0].values()) == 400
    # one snapshot per publish (the replica's of the same range added none)
    appends = [s for s in table.snapshots() if s.summary and s.summary.get(SUMMARY_SUPERVISOR)]
    assert len(appends) == 2
    # Spark, with Iceberg's runtime and its JdbcCatalog on the same database
    query = "SELECT COUNT(*) AS n, COUNT(DISTINCT word) AS words FROM ice"
    spark = iceberg_sql(query, metadata_url, tmp_path / "deep", jar_cache)
    assert spark.returncode == 0, spark.stderr[-3000:]
    assert json.loads(spark.stdout) == [{"n": 400, "words": 400}]


def _tasks(api: httpx.Client) -> list[dict[str, Any]]:
    return list(api.get(f"{BASE}/ice/status").json()["payload"]["activeTasks"])


def _reading(api: httpx.Client) -> list[str] | None:
    """The two replicas' ids once both read."""
    ids = [t["id"] for t in _tasks(api) if t.get("currentOffsets")]
    return ids if len(ids) == 2 else None


def _read(api: httpx.Client, gone: str = "") -> int | None:
    """Where both replicas have reached (the lesser, over both partitions); None until two
    read (and neither is `gone`)."""
    reading = [t for t in _tasks(api) if t.get("currentOffsets") and t["id"] != gone]
    if len(reading) != 2:
        return None
    return min(sum(t["currentOffsets"].values()) for t in reading)


def _published(service: Any) -> int:
    return sum(row[0] for row in db_rows(service, select(SegmentRow.num_rows)))
