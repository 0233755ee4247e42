"""The metadata DB down (PostgreSQL stopped at once, as a crash) and back: the API answers 503
with Retry-After (try again), never a 500, and serves again once the DB is back, with nothing
lost. Found by bench/chaos.py (seed 10, postgres_restart): a task host's heartbeat got a 500,
and the overlord's log a traceback, while the DB restarted."""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from supervisor.db.models import LeaderLeaseRow, SegmentRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.postgres import LocalPostgres
from supervisor.net import free_port
from supervisor.testkit import faults
from supervisor.testkit.hosts import task_host
from supervisor.testkit.service import RunningService, db_rows, task_settings
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec, words_topic

BASE = "/druid/indexer/v1/supervisor"
REFUSAL = {"error": "the metadata DB cannot be reached right now; try again"}


def test_a_metadata_db_that_cannot_be_reached_is_a_503_until_it_is_back(
    jar_cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    # a durable cluster (a data directory of its own): a throwaway one commits without waiting
    # for its WAL, and a crash loses the last commits, as PostgreSQL warns of that setting
    root = Path(tempfile.mkdtemp(prefix="sluicegate-pg-outage-"))
    root.chmod(0o755)  # as root the server runs as postgres, which must reach the folder
    server = LocalPostgres(root / "pg").start()
    try:
        url = server.create_database("outage")
        settings = task_settings(tmp_path, jar_cache, metadata_url=url)
        spec = words_spec("kept", "words", f"127.0.0.1:{free_port()}")
        with (
            RunningService(settings) as service,
            httpx.Client(base_url=service.url, timeout=30) as api,
        ):
            assert api.post(BASE, json=spec).status_code == 200
            server.crash()
            crashed = time.time()
            heartbeat = {
                "host": "127.0.0.1:1",
                "scheme": "http",
                "ip": "127.0.0.1",
                "capacity": 1,
                "version": "1",
                "category": "_default_worker_category",
                "token": "x" * 32,
            }
            for method, path, body in (
                ("GET", BASE, None),
                ("GET", f"{BASE}/kept/status", None),
                ("POST", BASE, spec),
                ("POST", "/druid-internal/v1/workers", heartbeat),
            ):
                answer = api.request(method, path, json=body)
                assert answer.status_code == 503, (method, path, answer.text)
                assert answer.json() == REFUSAL
                assert answer.headers["Retry-After"] == "2"
            time.sleep(3)  # the leader's loops meet the outage too
            server.start()
            wait_for(lambda: api.get(BASE).status_code == 200, 60, "the API served again")
            assert api.get(BASE).json() == ["kept"]
        # the outage is said in lines, not tracebacks: nothing in it was unexpected
        traced = [r.getMessage() for r in caplog.records if r.exc_info and r.created >= crashed]
        assert traced == []
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.kafka
@pytest.mark.spark
def test_a_launch_the_metadata_db_interrupted_starts_once_it_is_back(
    kafka: LocalKafka,
    jar_cache: Path,
    tmp_path: Path,
) -> None:
    """bench/chaos.py seed 33: PostgreSQL stopped between recording a task and placing it on
    a task host (placing reads the hosts from the DB). The task stayed "running" without a
    location, never started, and its group waited for it as long as the overlord led. Now,
    with the DB back within the lease (the same leader goes on: no new leader's recovery),
    the task starts, reads, and publishes every record once."""
    root = Path(tempfile.mkdtemp(prefix="sluicegate-pg-launch-"))
    root.chmod(0o755)
    server = LocalPostgres(root / "pg").start()
    crashed = threading.Event()

    def point(name: str) -> None:
        if name == faults.TASK_RECORDED and not crashed.is_set():
            crashed.set()
            server.crash()  # the task is recorded; placing it meets the DB away

    undo = faults.install(point)
    try:
        url = server.create_database("launch")
        topic = words_topic(kafka, "launch", 100)
        settings = task_settings(tmp_path, jar_cache, metadata_url=url, lease_s=30.0)
        with (
            RunningService(settings) as service,
            httpx.Client(base_url=service.url, timeout=30) as api,
            task_host(service.url, tmp_path / "host"),
        ):
            wait_for(lambda: api.get("/druid/indexer/v1/workers").json(), 30, "the task host")
            spec = words_spec("interrupted", topic, kafka.bootstrap_servers)
            assert api.post(BASE, json=spec).status_code == 200
            wait_for(crashed.is_set, 60, "the task recorded")
            time.sleep(3)  # the launch, the passes and the monitor meet the outage
            server.start()

            def read_all() -> bool:
                answer = api.get(f"{BASE}/interrupted/status")
                payload = answer.json()["payload"] if answer.status_code == 200 else {}
                tasks = payload.get("activeTasks") or []
                return bool(tasks) and all(t.get("currentOffsets") == {"0": 100} for t in tasks)

            wait_for(read_all, 180, "the interrupted task started and read")
            handoff = {"taskGroupIds": [0]}
            assert api.post(f"{BASE}/interrupted/taskGroups/handoff", json=handoff).is_success
            wait_for(
                lambda: (
                    api.get(f"{BASE}/interrupted/status").json()["payload"]["committedOffsets"]
                    == {"0": 100}
                ),
                180,
                "the records published",
            )
            rows = db_rows(
                service, select(SegmentRow.num_rows).where(SegmentRow.datasource == "interrupted")
            )
            assert sum(n for (n,) in rows) == 100
            leaders = db_rows(service, select(LeaderLeaseRow.epoch))
            assert leaders == [(1,)]  # one leader throughout: its monitor started the task
    finally:
        undo()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
