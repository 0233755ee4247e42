"""Fixtures on the real stack: a Kafka broker, Spark with the Kafka connector, PostgreSQL.

One of each per test session; metadata DBs are fresh per test (SQLite and PostgreSQL).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from supervisor.db.engine import make_engine, migrate, session_factory
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.postgres import LocalPostgres
from supervisor.devstack.registry import LocalRegistry
from supervisor.devstack.s3 import LocalS3
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic, produce
from supervisor.settings import Settings
from supervisor.testkit.service import RunningService
from tasks.jars import kafka_broker_bundle, kafka_tools_bundle, resolve, spark_kafka_bundle
from tasks.procfs import ancestors
from tests.stack_workers import *  # noqa: F403 (the hooks that share the stack's tests out)

_db_counter = itertools.count()


@pytest.fixture(scope="session", autouse=True)
def spark_scratch() -> Iterator[Path]:
    """The scratch directories of every Spark JVM the session starts (block managers, fetched
    files; SPARK_LOCAL_DIRS, which the processes it starts inherit) in one folder, removed at
    the end: a JVM that a test SIGKILLs never removes its own, and /tmp kept them."""
    folder = Path(tempfile.mkdtemp(prefix="sluicegate-spark-"))
    before = os.environ.get("SPARK_LOCAL_DIRS")
    os.environ["SPARK_LOCAL_DIRS"] = str(folder)
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop("SPARK_LOCAL_DIRS", None)
        else:
            os.environ["SPARK_LOCAL_DIRS"] = before
        shutil.rmtree(folder, ignore_errors=True)


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
    from tasks.spark.session import build_session

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


@pytest.fixture
def service(settings: Settings) -> Iterator[RunningService]:
    with RunningService(settings) as running:
        yield running


@pytest.fixture
def api(service: RunningService) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=30) as client:
        yield client


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


# -- a service with authentication on, and its users ---------------------------------------

SEC = "/druid-ext/basic-security"
AUTHN = f"{SEC}/authentication/db/basic"
AUTHZ = f"{SEC}/authorization/db/basic"
ADMIN = ("admin", "admin-pass-1")


@pytest.fixture
def secured(settings: Settings) -> Iterator[tuple[RunningService, httpx.Client]]:
    """A service with basic authentication, and a client logged in as its admin."""
    settings.auth = "basic"
    settings.admin_password = SecretStr(ADMIN[1])
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30, auth=ADMIN) as admin,
    ):
        yield service, admin


def make_user(
    admin: httpx.Client, name: str, password: str, permissions: list[dict[str, Any]]
) -> None:
    """A user who can log in with `password`, holding `permissions` through a role of its
    own (`{name}-role`)."""
    for path in (f"{AUTHN}/users/{name}", f"{AUTHZ}/users/{name}", f"{AUTHZ}/roles/{name}-role"):
        assert admin.post(path).status_code == 200, path
    body = {"password": password}
    assert admin.post(f"{AUTHN}/users/{name}/credentials", json=body).status_code == 200
    role = f"{AUTHZ}/roles/{name}-role"
    assert admin.post(f"{role}/permissions", json=permissions).status_code == 200
    assert admin.post(f"{AUTHZ}/users/{name}/roles/{name}-role").status_code == 200


def _ancestors() -> set[int]:
    """This process and those above it (`timeout 900 pytest --basetemp=...` names the base
    too, and is no straggler)."""
    return ancestors(os.getpid())


def _outliving(base: Path) -> list[tuple[int, str]]:
    """Processes whose command line names this run's temporary directory: what a test started
    and did not end (a task's host application, a task, a server)."""

    found, ours = [], _ancestors()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ours:
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(base) in command:
            found.append((int(entry.name), command[:200]))
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Nothing a test started may outlive the run: stragglers are killed, and fail it."""
    import contextlib
    import os
    import signal

    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None or getattr(factory, "_basetemp", None) is None:
        return
    import time

    left = _outliving(factory.getbasetemp())
    deadline = time.monotonic() + 10  # one on its way out is given a moment
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _outliving(factory.getbasetemp())
    for pid, _ in left:
        with contextlib.suppress(OSError):  # its group too: a host application's JVM
            group = os.getpgid(pid)
            if group == pid and group != os.getpgrp():
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = "\n".join(f"  {pid} {command}" for pid, command in left)
        if reporter is not None:
            reporter.write_line(f"processes outlived the tests (killed now):\n{lines}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
