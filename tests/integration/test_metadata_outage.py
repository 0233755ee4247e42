"""The metadata DB down (PostgreSQL stopped at once, as a crash) and back: the API answers 503
with Retry-After (try again), never a 500, and serves again once the DB is back, with nothing
lost. Found by bench/chaos.py (seed 10, postgres_restart): a task host's heartbeat got a 500,
and the overlord's log a traceback, while the DB restarted."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from supervisor.devstack.postgres import LocalPostgres
from supervisor.net import free_port
from tests.conftest import RunningService, task_settings, wait_for, words_spec

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
