"""Segments in S3, on a real S3 server (`sluicegate s3-local`: SeaweedFS): tasks of both batch
engines write their persists and segments there through Arrow, replicas under their own task
paths with only the winner's files kept, segment rows carry Druid's S3 loadSpec, and
`sluicegate sql` reads them. Bad buckets and credentials stop `serve` with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.s3 import LocalS3
from supervisor.lake.tables import CATALOG
from supervisor.testkit.service import db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec, words_topic

BASE = "/druid/indexer/v1/supervisor"
COUNT = 300


@pytest.mark.kafka
@pytest.mark.spark
def test_segments_of_both_engines_and_replicas_land_in_s3(
    kafka: LocalKafka, s3: LocalS3, jar_cache: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    for name, value in s3.environment().items():
        monkeypatch.setenv(name, value)
    prefix = f"run-{uuid.uuid4().hex[:8]}"
    topic = words_topic(kafka, "s3", COUNT)
    direct = words_spec("direct", topic, kafka.bootstrap_servers)
    direct["spec"]["ioConfig"]["replicas"] = 2
    spark = words_spec("spark", topic, kafka.bootstrap_servers)
    spark["spec"]["dataSchema"]["transformSpec"] = {  # the Spark SQL engine
        "transforms": [{"type": "expression", "name": "copy", "expression": "word"}]
    }
    with overlord_with_tasks(
        tmp_path,
        jar_cache,
        "local[1]",
        deep_storage=f"s3://segments/{prefix}",
    ) as (service, api):
        for body in (direct, spark):
            assert api.post(BASE, json=body).status_code == 200
        for name in ("direct", "spark"):
            wait_for(lambda n=name: _caught_up(api, n), 180, f"{name} read")
        storage = s3.storage(prefix)
        # mid-read, every task's persists are in the bucket
        reading = _running(service)
        persisted = {t: _all_files(storage, storage.path("_tasks", t)) for t in reading}
        assert len(reading) == 3 and all(persisted.values()), persisted
        for name in ("direct", "spark"):
            api.post(f"{BASE}/{name}/taskGroups/handoff", json={"taskGroupIds": [0]})
        for name in ("direct", "spark"):
            wait_for(lambda n=name: _rows(service, n) == COUNT, 240, f"{name}'s segments")
        published = [row[0] for row in db_rows(service, select(SegmentRow.path))]
        # the first generation's tasks (three: the race's loser too) exit and clear their
        # persists
        wait_for(lambda: len(_finished(service)) == 3, 120, "the first tasks' exits")
        for task_id in _finished(service):
            assert _all_files(storage, storage.path("_tasks", task_id)) == []
        specs = api.get(
            "/druid/coordinator/v1/metadata/datasources/direct/segments", params={"full": ""}
        ).json()
        sql = _sql("--url", service.url)
        metadata_url = service.settings.metadata_url
    # the tables in the bucket: pyiceberg's SqlCatalog and Spark's JdbcCatalog (S3FileIO)
    catalog = SqlCatalog(
        CATALOG,
        uri=metadata_url,
        **{"s3.endpoint": s3.endpoint, "s3.access-key-id": s3.access_key},
        **{"s3.secret-access-key": s3.secret_key, "s3.region": "us-east-1"},
    )
    for name in ("direct", "spark"):
        table = catalog.load_table(f"druid.{name}")
        assert table.metadata.location == f"s3://segments/{prefix}/{name}"
        assert table.scan().to_arrow().num_rows == COUNT
    iceberg = _sql(
        "--iceberg",
        SLUICEGATE_METADATA_URL=metadata_url,
        SLUICEGATE_DEEP_STORAGE=f"s3://segments/{prefix}",
        SLUICEGATE_JAR_CACHE=str(jar_cache),
    )
    assert iceberg.returncode == 0, iceberg.stderr[-3000:]
    assert json.loads(iceberg.stdout) == [{"d": COUNT, "s": COUNT}]
    assert published and all(p.startswith(f"s3://segments/{prefix}/") for p in published)
    assert all(storage.size(storage.fs_path(p)) > 0 for p in published)
    # only the winners' files: every Parquet file under the prefix is a published one
    segments = [
        p
        for p in _all_files(storage, storage.path())
        if "/_tasks/" not in p and "/metadata/" not in p  # (the tables' own files)
    ]
    assert sorted(segments) == sorted(storage.fs_path(p) for p in published)
    assert specs and all(
        s["loadSpec"]["type"] == "s3_zip"
        and s["loadSpec"]["bucket"] == "segments"
        and s["loadSpec"]["key"].startswith(f"{prefix}/direct/")
        and s["loadSpec"]["S3Schema"] == "s3n"
        for s in specs
    )
    assert sql.returncode == 0, sql.stderr
    assert json.loads(sql.stdout) == [{"d": COUNT, "s": COUNT}]

    # a datasource dropped and killed: its segment files leave the bucket, the other's stay
    with overlord_with_tasks(
        tmp_path,
        jar_cache,
        "local[1]",
        deep_storage=f"s3://segments/{prefix}",
        run_supervisors=False,
    ) as (_, api):
        assert api.delete("/druid/coordinator/v1/datasources/spark").json() == {
            "numChangedSegments": len([p for p in published if f"/{prefix}/spark/" in p])
        }
        kill = {"type": "kill", "dataSource": "spark", "interval": "1000-01-01/3000-01-01"}
        assert api.post("/druid/indexer/v1/task", json=kill).status_code == 200
    left = {p for p in _all_files(storage, storage.path()) if p.endswith(".parquet")}
    assert not any(p.startswith(storage.fs_path(f"s3://segments/{prefix}/spark/")) for p in left)
    assert all(storage.fs_path(p) in left for p in published if f"/{prefix}/direct/" in p)
    assert catalog.load_table("druid.spark").scan().to_arrow().num_rows == 0
    assert catalog.load_table("druid.direct").scan().to_arrow().num_rows == COUNT


def _sql(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`sluicegate sql` counting both datasources' rows, on a local[1] Spark."""
    query = "SELECT (SELECT COUNT(*) FROM direct) AS d, (SELECT COUNT(*) FROM spark) AS s"
    command = [sys.executable, "-m", "supervisor.cli", "sql", query, *args, "-o", "json"]
    return subprocess.run(
        [*command, "--master", "local[1]"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
    )


def _all_files(storage: Any, root: str) -> list[str]:
    import pyarrow.fs as pafs

    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    infos = storage.filesystem().get_file_info(selector)
    return [i.path for i in infos if i.type == pafs.FileType.File]


def _running(service: Any) -> list[str]:
    rows = db_rows(service, select(TaskRow.id).where(TaskRow.status == "RUNNING"))
    return [row[0] for row in rows]


def _finished(service: Any) -> list[str]:
    rows = db_rows(service, select(TaskRow.id).where(TaskRow.status == "SUCCESS"))
    return [row[0] for row in rows]


@pytest.mark.parametrize(
    ("location", "env", "code", "message"),
    [
        (
            "s3://no-such-bucket/x",
            {},
            1,
            "error: deep storage s3://no-such-bucket/x: bucket no-such-bucket not found",
        ),
        ("s3://segments/x", {"AWS_SECRET_ACCESS_KEY": "wrong"}, 1, "error: deep storage "),
        ("gs://segments/x", {}, 2, "error: bad settings: "),
        ("s3://", {}, 2, "error: bad settings: "),
    ],
)
def test_serve_refuses_unusable_deep_storage(
    s3: LocalS3, tmp_path: Path, location: str, env: dict[str, str], code: int, message: str
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "supervisor.cli",
            "serve",
            "--deep-storage",
            location,
            "--port",
            "0",
            "--metadata-url",
            f"sqlite:///{tmp_path / 'meta.db'}",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, **s3.environment(), **env},
        cwd=tmp_path,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, result.stderr
    assert len(lines) == 1 and lines[0].startswith(message), lines
    assert "Traceback" not in result.stderr


def _caught_up(api: Any, supervisor_id: str) -> bool:
    payload = api.get(f"{BASE}/{supervisor_id}/status").json()["payload"]
    return payload.get("latestOffsets") == {"0": COUNT} and payload.get("aggregateLag") == 0


def _rows(service: Any, supervisor_id: str) -> int:
    rows = db_rows(
        service, select(SegmentRow.num_rows).where(SegmentRow.datasource == supervisor_id)
    )
    return sum(row[0] for row in rows)


@pytest.mark.parametrize("where", ["s3", "local"])
def test_the_leader_sweeps_the_files_of_tasks_that_did_not_publish(
    s3: LocalS3, sessions: Any, tmp_path: Path, where: str
) -> None:
    from datetime import UTC, datetime

    from supervisor.services.cleanup import sweep_task_files
    from tasks.storage import Storage

    storage = s3.storage(f"sweep-{uuid.uuid4().hex[:8]}") if where == "s3" else None
    storage = storage or Storage(root=str(tmp_path / "deep"))
    now = datetime.now(UTC)
    with sessions() as session:
        for task_id, status in (("t-running", "RUNNING"), ("t-failed", "FAILED")):
            session.add(
                TaskRow(
                    id=task_id,
                    type="index_kafka",
                    supervisor_id="s",
                    datasource="d",
                    payload={},
                    status=status,
                    created_at=now,
                    updated_at=now,
                )
            )
        session.commit()
    fs = storage.filesystem()
    for task_id in ("t-running", "t-failed", "t-unknown"):
        directory = storage.path("_tasks", task_id, "persists", "0000-000000")
        storage.make_dirs(directory)
        with fs.open_output_stream(f"{directory}/0.parquet") as out:
            out.write(b"rows")
    assert sweep_task_files(storage, sessions) == ["t-failed", "t-unknown"]
    assert _all_files(storage, storage.path("_tasks")) == [
        storage.path("_tasks", "t-running", "persists", "0000-000000", "0.parquet")
    ]
    assert sweep_task_files(storage, sessions) == []  # nothing left to sweep
