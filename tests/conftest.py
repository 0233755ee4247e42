"""Fixtures on the real stack: a Kafka broker, Spark with the Kafka connector, PostgreSQL.

One of each per test session; metadata DBs are fresh per test (SQLite and PostgreSQL).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy.orm import Session, sessionmaker

from supervisor.app import create_app
from supervisor.db.engine import make_engine, migrate, session_factory
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.postgres import LocalPostgres
from supervisor.devstack.registry import LocalRegistry
from supervisor.devstack.s3 import LocalS3
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic, produce
from supervisor.net import free_port
from supervisor.settings import Settings
from tasks.jars import kafka_broker_bundle, kafka_tools_bundle, resolve, spark_kafka_bundle

_db_counter = itertools.count()


@pytest.fixture(scope="session")
def jar_cache() -> Path:
    cache = Settings().jar_cache
    resolve(kafka_broker_bundle(), cache)
    resolve(kafka_tools_bundle(), cache)
    resolve(spark_kafka_bundle(), cache)
    return cache


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory, jar_cache: Path) -> Iterator[LocalKafka]:
    broker = LocalKafka(tmp_path_factory.mktemp("kafka"), jar_cache)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory, jar_cache: Path) -> Iterator[LocalKafka]:
    """A broker that takes only SASL_SSL (SCRAM-SHA-512 over TLS with a self-signed CA)."""
    broker = LocalKafka(tmp_path_factory.mktemp("secure-kafka"), jar_cache, security="sasl_ssl")
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def spark(jar_cache: Path) -> Iterator[Any]:
    from tasks.spark import build_session

    session = build_session(jar_cache, master="local[2]", app_name="sluicegate-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    server = LocalPostgres().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalS3]:
    """A real S3 server (SeaweedFS) with a bucket `segments`, test credentials."""
    with LocalS3(tmp_path_factory.mktemp("s3"), "segments", "test-key", "test-secret-1") as s:
        yield s


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    """A real Confluent-compatible schema registry (Apicurio), its schemas in memory."""
    with LocalRegistry(tmp_path_factory.mktemp("registry")) as server:
        yield server


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Debian's headless Chromium, driven by its chromedriver (the console's tests)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(params=["sqlite", "postgresql"])
def metadata_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'metadata.db'}"
    server: LocalPostgres = request.getfixturevalue("postgres")
    return server.create_database(f"t{next(_db_counter)}")


@pytest.fixture
def settings(metadata_url: str, tmp_path: Path) -> Settings:
    return Settings(
        metadata_url=metadata_url,
        deep_storage=tmp_path / "segments",
        work_dir=tmp_path / "work",
        max_request_bytes=64 * 1024,
        run_supervisors=False,  # these tests are about the API; the engine has its own
    )


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """Sessions of a fresh SQLite metadata DB, migrated to head."""
    engine = make_engine(f"sqlite:///{tmp_path / 'meta.db'}")
    migrate(engine)
    yield session_factory(engine)
    engine.dispose()


class RunningService:
    """The app served by a real uvicorn server on a free loopback port, in a thread."""

    def __init__(self, settings: Settings, port: int | None = None) -> None:
        self.settings = settings
        self.port = port or free_port()
        # what the service tells tasks and other overlords it is at (its advertised URL)
        settings.port = self.port
        self.url = f"{settings.scheme}://127.0.0.1:{self.port}"
        self.app = create_app(settings)
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            ssl_certfile=settings.tls_cert,
            ssl_keyfile=settings.tls_key,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> RunningService:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the service did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture
def service(settings: Settings) -> Iterator[RunningService]:
    with RunningService(settings) as running:
        yield running


@pytest.fixture
def api(service: RunningService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=30) as client:
        yield client


@contextmanager
def overlord_with_tasks(
    tmp_path: Path, jar_cache: Path, task_master: str, **overrides: Any
) -> Iterator[tuple[RunningService, httpx.Client]]:
    """The service running real task processes (and its supervisors), killed on exit."""
    settings = task_settings(
        tmp_path, jar_cache, task_master=task_master, kill_tasks_on_exit=True, **overrides
    )
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30) as client,
    ):
        yield service, client


@contextmanager
def task_host(
    overlord_url: str,
    work: Path,
    capacity: int = 4,
    args: tuple[str, ...] = ("--master", "local[1]"),
    env: dict[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A `sluicegate worker` process on a free port (its log beside `work`); yields its
    host:port once registered. On the way out it is stopped and its tasks SIGKILLed."""
    port = free_port()
    command = [sys.executable, "-m", "supervisor.cli", "worker", "--overlord", overlord_url]
    command += ["--capacity", str(capacity), "--port", str(port), "--work-dir", str(work)]
    with (work.parent / f"{work.name}.log").open("ab") as log:
        process = subprocess.Popen(
            [*command, *args],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            start_new_session=True,
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(f"task host 127.0.0.1:{port} registered"), line
        yield f"127.0.0.1:{port}", process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(30)
        kill_tasks(work)


def kill_tasks(work: Path) -> None:
    """SIGKILL every task process a task host started, and its shared application if it ran
    one (each leads its own process group)."""
    for pid_file in (work / "tasks").glob("*/pid"):
        with suppress(OSError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
    with suppress(OSError, ValueError, KeyError):
        os.killpg(int(json.loads((work / "host-app" / "app.json").read_text())["pid"]), 9)


def task_settings(tmp_path: Path, jar_cache: Path, **overrides: Any) -> Settings:
    """A service that runs real task processes (local[1] Spark), its files under tmp_path,
    its metadata DB a SQLite file there unless `metadata_url` says otherwise."""
    values: dict[str, Any] = {
        "metadata_url": f"sqlite:///{tmp_path / 'meta.db'}",
        "deep_storage": tmp_path / "deep",
        "work_dir": tmp_path / "work",
        "jar_cache": jar_cache,
        "task_master": "local[1]",
        **overrides,
    }
    return Settings(**values)


def words_topic(kafka: LocalKafka, prefix: str, count: int) -> str:
    """A fresh one-partition topic holding `count` records {"ts": ..., "word": "w"}."""
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 1)
    produce_words(kafka, topic, count)
    return topic


def produce_words(kafka: LocalKafka, topic: str, count: int) -> None:
    record = (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": "w"}).encode())
    produce(kafka.bootstrap_servers, topic, [record] * count)


def words_spec(supervisor_id: str, topic: str, bootstrap: str) -> dict[str, Any]:
    """A supervisor of a words topic: period 1 s, rollovers only when handed off."""
    return supervisor_spec(
        supervisor_id,
        topic,
        bootstrap,
        ["word"],
        segment_granularity="DAY",
        period="PT1S",
        taskDuration="PT1H",
    )


def wait_for(
    predicate: Any, timeout: float = 120, what: str = "condition", every: float = 0.3
) -> Any:
    """Poll until `predicate` returns something truthy; fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")
