"""Tasks on a real Spark standalone cluster (`sluicegate spark-local`: a Master and a Worker
from pyspark's own jars): both batch engines read, persist and merge on the cluster's
executors, the host's application (or, `make test-long`, each task's) takes only its share of
the cores, and `sluicegate sql` runs on the same cluster; a cluster with a secret takes
applications that know it (SLUICEGATE_SPARK_SECRET)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.spark import LocalSparkCluster
from supervisor.testkit.service import db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec, words_topic

BASE = "/druid/indexer/v1/supervisor"
COUNT = 400


SECRET = secrets.token_hex(16)  # the cluster's: its master, workers and applications share it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSparkCluster]:
    """A cluster that takes only applications knowing its secret (issue 43)."""
    data = tmp_path_factory.mktemp("spark")
    with LocalSparkCluster(data, workers=1, cores=6, memory="6g", secret=SECRET) as c:
        yield c


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.parametrize("runtime", ["shared", pytest.param("process", marks=pytest.mark.long)])
def test_both_engines_run_on_the_cluster_executors(
    kafka: LocalKafka,
    cluster: LocalSparkCluster,
    jar_cache: Path,
    tmp_path: Path,
    runtime: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the operator's setting, which the overlord's application (and `sluicegate sql`) inherit
    monkeypatch.setenv("SLUICEGATE_SPARK_SECRET", SECRET)
    topic = words_topic(kafka, "cluster", COUNT)
    direct = words_spec("direct", topic, kafka.bootstrap_servers)
    spark = words_spec("spark", topic, kafka.bootstrap_servers)
    spark["spec"]["dataSchema"]["transformSpec"] = {  # the Spark SQL engine
        "transforms": [{"type": "expression", "name": "copy", "expression": "word"}]
    }
    with overlord_with_tasks(tmp_path, jar_cache, cluster.url, task_runtime=runtime) as (svc, api):
        for body in (direct, spark):
            assert api.post(BASE, json=body).status_code == 200
        for name in ("direct", "spark"):
            wait_for(lambda n=name: _offsets(api, n) == {"0": COUNT}, 180, f"{name} read")
        running = _applications(cluster, "activeapps")
        # mid-read, the persists are in deep storage (every executor reaches it), not in the
        # tasks' work directories
        reading = _running(svc)
        persisted = {
            t: list((tmp_path / "deep" / "_tasks" / t).rglob("*.parquet")) for t in reading
        }
        assert len(reading) == 2 and all(persisted.values()), persisted
        for name in ("direct", "spark"):
            api.post(f"{BASE}/{name}/taskGroups/handoff", json={"taskGroupIds": [0]})
        for name in ("direct", "spark"):
            wait_for(lambda n=name: _rows(svc, n) == COUNT, 240, f"{name}'s segments")
        files = [row[0] for row in db_rows(svc, select(SegmentRow.path))]
        done = wait_for(lambda: _succeeded(svc, 2), 120, "both first tasks' exits")
        from supervisor.cli.views import local_session, published_files, register_views

        session = local_session(cluster.url)
        try:
            register_views(session, published_files(svc.url))
            counted = session.sql(
                "SELECT (SELECT COUNT(*) FROM direct), (SELECT COUNT(*) FROM spark)"
            ).collect()[0]
        finally:
            session.stop()
    # the host's one application (or every task's) ran on the cluster, each holding one core
    # (the setting's default), not all six the worker offers
    if runtime == "shared":
        assert [app["name"].split("-")[1] for app in running] == ["host"], running
    else:
        assert len(running) >= 2
        assert all(app["name"].startswith("sluicegate-index_kafka_") for app in running)
    assert all(app["cores"] == 1 for app in running)
    assert all(Path(path).exists() for path in files)
    # the persists were in deep storage, which every executor reaches, and went once published
    for task_id in done:
        assert not (tmp_path / "work" / "tasks" / task_id / "persists").exists()
        assert not list((tmp_path / "deep" / "_tasks" / task_id).rglob("*.parquet"))
    assert (tmp_path / "deep" / "_tasks").is_dir()
    assert tuple(counted) == (COUNT, COUNT)


@pytest.mark.spark
def test_a_driver_without_the_clusters_secret_is_refused(
    cluster: LocalSparkCluster, jar_cache: Path, tmp_path: Path
) -> None:
    """Two drivers of the product's own session builder, one with no SLUICEGATE_SPARK_SECRET
    and one with a wrong one: the master refuses each at its first RPC (Spark's SASL), lists
    neither, and the drivers hold no executor. (Each driver itself gives up only after its
    three 20 s registration tries; the test does not wait for that.)"""
    log = cluster.data_dir / "logs" / "master.log"
    seen = log.read_text(errors="replace")
    code = (
        "import sys, pathlib; from tasks.spark.session import build_session; "
        f"build_session(pathlib.Path({str(jar_cache)!r}), master={cluster.url!r}, "
        "app_name=sys.argv[1])"
        ".range(10).count()"
    )
    drivers = []
    for name, secret in (("intruder-none", None), ("intruder-wrong", SECRET[::-1])):
        env = {k: v for k, v in os.environ.items() if k != "SLUICEGATE_SPARK_SECRET"}
        if secret is not None:
            env["SLUICEGATE_SPARK_SECRET"] = secret
        with (tmp_path / f"{name}.log").open("wb") as out:
            drivers.append(
                subprocess.Popen(
                    [sys.executable, "-c", code, name],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            )
    refusals = (
        "Expected SaslMessage, received something else",  # no secret: no SASL at all
        "DIGEST-MD5: digest response format violation. Mismatched response",  # a wrong one
    )
    try:

        def refused() -> bool:
            ended = [d.args[-1] for d in drivers if d.poll() is not None]
            assert not ended, f"{ended} ended before the master refused them (see their logs)"
            return all(r in log.read_text(errors="replace")[len(seen) :] for r in refusals)

        wait_for(refused, 120, "the master's refusal of both drivers")
        state = cluster.state()
        assert state is not None
        names = [a["name"] for key in ("activeapps", "completedapps") for a in state[key]]
        assert not [n for n in names if n.startswith("intruder")], names
        assert all(driver.poll() is None for driver in drivers)  # still knocking
    finally:
        for driver in drivers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)


@pytest.mark.spark
def test_spark_local_starts_and_stops_a_cluster(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "supervisor.cli",
            "spark-local",
            "--workers",
            "1",
            "--cores",
            "2",
            "--memory",
            "1g",
            "--port",
            "0",
            "--data-dir",
            str(tmp_path / "spark"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SLUICEGATE_SPARK_SECRET": SECRET},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("Spark master ready at spark://127.0.0.1:"), first
        assert "authenticated (SLUICEGATE_SPARK_SECRET)" in first
        master_log = (tmp_path / "spark" / "logs" / "master.log").read_text()
        assert "authentication enabled" in master_log
        assert SECRET not in master_log
        ui = first.split("web UI ")[1].split(",")[0]
        state = json.loads(subprocess.check_output(["curl", "-s", f"{ui}/json/"]))
        assert [w["state"] for w in state["workers"]] == ["ALIVE"]
        assert state["workers"][0]["cores"] == 2
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "Spark stopped" in out
    # the master's and worker's JVMs are gone
    left = subprocess.run(
        ["pgrep", "-f", str(tmp_path / "spark")], capture_output=True, text=True, check=False
    )
    assert left.stdout.split() == []


def test_spark_local_refuses_a_bad_memory_size(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "spark-local", "--memory", "lots"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "error: --memory 'lots': a size such as 512m or 8g"


def _applications(cluster: LocalSparkCluster, key: str) -> list[dict[str, Any]]:
    state = cluster.state() or {}
    apps = state.get(key)
    return [app for app in apps if isinstance(app, dict)] if isinstance(apps, list) else []


def _running(service: Any) -> list[str]:
    rows = db_rows(service, select(TaskRow.id).where(TaskRow.status == "RUNNING"))
    return [row[0] for row in rows]


def _succeeded(service: Any, count: int) -> list[str]:
    rows = db_rows(service, select(TaskRow.id).where(TaskRow.status == "SUCCESS"))
    return [row[0] for row in rows] if len(rows) >= count else []


def _offsets(api: Any, supervisor_id: str) -> dict[str, int] | None:
    payload = api.get(f"{BASE}/{supervisor_id}/status").json()["payload"]
    return payload.get("latestOffsets") if payload.get("aggregateLag") == 0 else None


def _rows(service: Any, supervisor_id: str) -> int:
    rows = db_rows(
        service, select(SegmentRow.num_rows).where(SegmentRow.datasource == supervisor_id)
    )
    return sum(row[0] for row in rows)
