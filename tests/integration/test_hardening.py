"""The second attack on the secured service (issue 43): each finding of that review, on the
real service and metadata DB (SQLite and PostgreSQL)."""

from __future__ import annotations

import logging
import re
import socket
import ssl
import stat
import threading
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session

from supervisor.clock import utc_now
from supervisor.db.engine import make_engine
from supervisor.db.models import TaskRow
from supervisor.devstack.certs import self_signed
from supervisor.runner.spawn import spawn
from supervisor.services.login_limits import ADDRESS_RATE
from supervisor.services.security import SecurityService
from supervisor.settings import Settings
from supervisor.testkit.hosts import task_host
from supervisor.testkit.service import RunningService, task_settings
from tasks import serving
from tasks.protocol import TOKEN_HEADER as TOKEN
from tests.conftest import AUTHN, AUTHZ, make_user
from tests.specs import spec, task

BASE = "/druid/indexer/v1/supervisor"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


# -- 6. masking and JAAS ---------------------------------------------------------------------


def test_compound_lower_case_secret_names_are_masked(api: httpx.Client) -> None:
    props = {
        "bootstrap.servers": "127.0.0.1:9092",
        "apikey": "api-key-in-clear",
        "ssl.keystore.keypassword": "key-password-in-clear",
        "clientsecret": "client-secret-in-clear",
        "ssl.keystore.location": "/var/lib/keys/client.jks",  # where a file is: not a secret
    }
    api_props = {**props}
    del api_props["ssl.keystore.location"]  # a file the service would read needs leave
    assert api.post(BASE, json=spec("wiki", consumerProperties=api_props)).status_code == 200
    for path in (f"{BASE}/wiki", f"{BASE}?full", f"{BASE}/wiki/history"):
        text = api.get(path).text
        assert "in-clear" not in text, path
    shown = api.get(f"{BASE}/wiki").json()["spec"]["ioConfig"]["consumerProperties"]
    assert shown == {
        "bootstrap.servers": "127.0.0.1:9092",
        "apikey": "<masked>",
        "ssl.keystore.keypassword": "<masked>",
        "clientsecret": "<masked>",
    }


@pytest.mark.parametrize(
    "jaas",
    [
        # a second module after a Plain one: the check read only the start
        f'{PLAIN} required username="u" password="p"; '
        'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/etc/x";',
        f'{PLAIN}X required username="u";',  # a class named like an allowed one
        f'{PLAIN} required username="u" password="p"',  # no end: not what Kafka reads
    ],
    ids=["second-module", "look-alike-class", "no-semicolon"],
)
def test_a_jaas_config_is_one_entry_of_an_allowed_login_module(
    api: httpx.Client, jaas: str
) -> None:
    props = {"bootstrap.servers": "127.0.0.1:9092", "sasl.jaas.config": jaas}
    refused = api.post(BASE, json=spec("wiki", consumerProperties=props))
    assert refused.status_code == 400, refused.text
    field = "spec.ioConfig.consumerProperties.sasl.jaas.config"
    assert refused.json()["errors"][0]["field"] == field
    assert api.post("/druid/indexer/v1/task", json=task("t1", props)).status_code == 400
    assert api.get(BASE).json() == []
    # a quoted semicolon or quote inside a value is part of the one entry
    props["sasl.jaas.config"] = f'{PLAIN} required username="a;b" password="p\\"q";'
    assert api.post(BASE, json=spec("wiki", consumerProperties=props)).status_code == 200


# -- 4. one content rule for every write -------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain", ""],
)
def test_a_body_less_write_that_declares_a_form_is_415(
    api: httpx.Client, content_type: str
) -> None:
    assert api.post(BASE, json=spec("wiki")).status_code == 200
    form = {"content-type": content_type}
    for path in (
        f"{BASE}/wiki/suspend",
        f"{BASE}/wiki/reset",
        f"{BASE}/wiki/terminate",
        f"{BASE}/suspendAll",
        f"{BASE}/terminateAll",
    ):
        refused = api.post(path, headers=form)
        assert refused.status_code == 415, (path, refused.text)
        assert refused.json()["field"] == "Content-Type"
    assert api.get(BASE).json() == ["wiki"]
    assert len(api.get(f"{BASE}/wiki/history").json()) == 1  # neither suspended nor ended
    # without a Content-Type (the CLI, curl -X POST) or with JSON's, a body-less write acts
    assert api.post(f"{BASE}/wiki/suspend").status_code == 200
    resumed = api.post(f"{BASE}/wiki/resume", headers={"content-type": "application/json"})
    assert resumed.status_code == 200


# -- 5. no answer tells of what the identity may not see -------------------------------------


def reads(pattern: str) -> list[dict[str, Any]]:
    return [{"resource": {"type": "DATASOURCE", "name": pattern}, "action": "READ"}]


def test_a_supervisor_or_task_out_of_reach_answers_the_same_there_or_not(
    secured: tuple[RunningService, httpx.Client],
) -> None:
    service, admin = secured
    assert admin.post(BASE, json=spec("secret")).status_code == 200
    hidden_spec = {**spec("secret"), "id": "wiki-hidden"}  # named like bob's, not bob's
    assert admin.post(BASE, json=hidden_spec).status_code == 200
    make_user(admin, "bob", "bob-pass-12", reads("wiki.*"))
    with httpx.Client(base_url=service.url, timeout=30, auth=("bob", "bob-pass-12")) as bob:
        # named outside bob's datasources: 403, there or not
        there = bob.get(f"{BASE}/secret/status")
        absent = bob.get(f"{BASE}/secrex/status")
        assert (there.status_code, absent.status_code) == (403, 403)
        assert there.json()["error"].replace("secret", "X") == absent.json()["error"].replace(
            "secrex", "X"
        )
        # named like bob's own: 404, whether it is another datasource's or not there
        hidden = bob.get(f"{BASE}/wiki-hidden/status")
        missing = bob.get(f"{BASE}/wiki-missing/status")
        assert (hidden.status_code, missing.status_code) == (404, 404)
        assert bob.get(f"{BASE}/wiki-hidden/history").status_code == 404
        # a task: 403 there or not, for anyone who may not read every datasource
        assert bob.get("/druid/indexer/v1/task/no-such-task/status").status_code == 403
    # the admin, who may read every datasource, is told what is missing
    assert admin.get(f"{BASE}/secrex/status").status_code == 404
    assert admin.get("/druid/indexer/v1/task/no-such-task/status").status_code == 404


def test_a_task_action_checks_the_token_before_the_task(service: RunningService) -> None:
    now = datetime.now(UTC)
    with service.app.state.context.sessions() as session:  # a task, not started (no host app)
        session.add(
            TaskRow(
                id="t1",
                type="index_kafka",
                supervisor_id="wiki",
                datasource="wiki",
                payload={},
                status="RUNNING",
                created_at=now,
                updated_at=now,
                token="the-tasks-own-token",
            )
        )
        session.commit()
    action = {
        "task": "no-such-task",
        "action": {
            "type": "checkPointDataSourceMetadata",
            "supervisorId": "wiki",
            "checkpointMetadata": {"type": "end", "stream": "t", "partitionSequenceNumberMap": {}},
        },
    }
    with httpx.Client(base_url=service.url, timeout=30) as api:
        absent = api.post("/druid/indexer/v1/action", json=action)
        action["task"] = "t1"
        wrong = api.post("/druid/indexer/v1/action", json=action, headers={TOKEN: "guess"})
    assert (absent.status_code, wrong.status_code) == (403, 403)
    assert absent.json() == wrong.json()


def test_a_task_whose_launch_is_not_recorded_yet_is_told_to_ask_again(
    service: RunningService,
) -> None:
    """A quick task (a small compaction) can ask before its launch, with its token, is
    recorded: RETRY, not a refusal (then it is checked as any)."""
    now = datetime.now(UTC)
    with service.app.state.context.sessions() as session:
        session.add(
            TaskRow(
                id="c1",
                type="compact",
                datasource="wiki",
                payload={},
                status="RUNNING",
                created_at=now,
                updated_at=now,
            )
        )
        session.commit()
    replace = {
        "type": "segmentTransactionalReplace",
        "supervisorId": "wiki",
        "dataSource": "wiki",
        "replaced": {},
        "segments": [],
    }
    with httpx.Client(base_url=service.url, timeout=30) as api:
        early = api.post(
            "/druid/indexer/v1/action", json={"task": "c1", "action": replace}, headers={TOKEN: "t"}
        )
        anonymous = api.post("/druid/indexer/v1/action", json={"task": "c1", "action": replace})
    assert early.status_code == 409 and early.json()["outcome"] == "retry", early.text
    assert early.json()["retryable"] is True
    assert anonymous.status_code == 403  # no token at all: refused as ever


# -- 3. the last administrator ---------------------------------------------------------------


def test_nobody_deletes_themselves_or_the_last_administrator(
    secured: tuple[RunningService, httpx.Client],
) -> None:
    service, admin = secured
    refused = admin.delete(f"{AUTHN}/users/admin")
    assert refused.status_code == 400 and refused.json()["field"] == "userName", refused.text
    assert admin.delete(f"{AUTHZ}/users/admin").status_code == 400
    assert admin.get(BASE).status_code == 200  # still logged in, still admin
    # a second administrator may delete the first
    make_user(admin, "carol", "carol-pass-1", [])
    assert admin.post(f"{AUTHZ}/users/carol/roles/admin").status_code == 200
    with httpx.Client(base_url=service.url, timeout=30, auth=("carol", "carol-pass-1")) as carol:
        assert carol.delete(f"{AUTHN}/users/admin").status_code == 200
        assert carol.delete(f"{AUTHZ}/users/admin").status_code == 200
        # now carol is the last: her role, its permission and her login stay
        for refused in (
            carol.delete(f"{AUTHZ}/users/carol/roles/admin"),
            carol.post(f"{AUTHZ}/roles/admin/permissions", json=[]),
            carol.delete(f"{AUTHZ}/roles/admin"),
        ):
            assert refused.status_code == 400, refused.text
            assert "no user who can manage security" in refused.json()["error"]
        # a change that leaves her the right goes through
        assert carol.delete(f"{AUTHZ}/roles/carol-role").status_code == 200
        assert carol.get(f"{AUTHZ}/roles/admin?full").json()["users"] == ["carol"]
        assert carol.get(BASE).status_code == 200


def test_two_administrators_deleting_each_other_at_once_leave_one(
    secured: tuple[RunningService, httpx.Client],
) -> None:
    """carol deletes admin in a transaction left open; admin's request to delete carol comes
    meanwhile. It waits for carol's change and is then refused: one administrator is left.
    (On PostgreSQL without the lock both committed: nobody could manage security.)"""
    service, admin = secured
    make_user(admin, "carol", "carol-pass-1", [])
    assert admin.post(f"{AUTHZ}/users/carol/roles/admin").status_code == 200
    engine = make_engine(service.settings.metadata_url)
    answers: list[httpx.Response] = []
    try:
        with Session(engine) as session:
            carols = SecurityService(session, utc_now, me="carol")
            carols.keeping_an_administrator(lambda: carols.delete_authn_user("admin"))
            request = threading.Thread(
                target=lambda: answers.append(admin.delete(f"{AUTHN}/users/carol"))
            )
            request.start()
            request.join(1.5)
            assert request.is_alive() and not answers  # queued behind carol's change
            session.commit()
        request.join(30)
    finally:
        engine.dispose()
    [answer] = answers
    assert answer.status_code == 400, answer.text
    assert "no user who can manage security" in answer.json()["error"]
    with httpx.Client(base_url=service.url, timeout=30, auth=("carol", "carol-pass-1")) as carol:
        assert carol.get(f"{AUTHZ}/roles/admin?full").json()["users"] == ["admin", "carol"]
        assert carol.get(f"{AUTHN}/users").json() == ["carol"]


def test_a_password_has_at_least_eight_characters(
    secured: tuple[RunningService, httpx.Client],
) -> None:
    _, admin = secured
    assert admin.post(f"{AUTHN}/users/dan").status_code == 200
    short = admin.post(f"{AUTHN}/users/dan/credentials", json={"password": "x" * 7})
    assert short.status_code == 400 and short.json()["field"] == "password"
    assert admin.get(f"{AUTHN}/users/dan").json()["credentials"] is None
    enough = admin.post(f"{AUTHN}/users/dan/credentials", json={"password": "x" * 8})
    assert enough.status_code == 200


# -- 2. password guessing is slowed, and costs the service little --------------------------


def test_a_thousand_wrong_passwords_are_slowed_and_the_user_still_logs_in_elsewhere(
    secured: tuple[RunningService, httpx.Client],
) -> None:
    service, admin = secured
    make_user(admin, "erin", "erin-pass-1", reads("wiki.*"))
    answers = []
    began = time.monotonic()
    with httpx.Client(base_url=service.url, timeout=30) as attacker:  # from 127.0.0.1
        for i in range(1000):
            guess = attacker.get(BASE, auth=("erin", f"guess-{i}"))
            answers.append(guess.status_code)
            if guess.status_code == 429:
                assert int(guess.headers["Retry-After"]) >= 1
        elapsed = time.monotonic() - began
        # the right password from the attacking address waits its turn too
        assert attacker.get(BASE, auth=("erin", "erin-pass-1")).status_code == 429
    assert set(answers) == {401, 429}
    # only the tries the limiter let through were hashed: its burst, then one a second
    hashed = answers.count(401)
    limit = ADDRESS_RATE.burst + ADDRESS_RATE.per_s * elapsed + 1
    assert hashed <= limit, (hashed, elapsed)
    assert answers[: int(ADDRESS_RATE.burst)] == [401] * int(ADDRESS_RATE.burst)
    # the user, from another address, logs in at once
    other = httpx.HTTPTransport(local_address="127.0.0.2")
    with httpx.Client(base_url=service.url, timeout=30, transport=other) as erin:
        assert erin.get(BASE, auth=("erin", "erin-pass-1")).status_code == 200


# -- 7. connections, heads, bodies, files, the docs page -------------------------------------


def _raw(service: RunningService) -> socket.socket:
    host, port = service.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def _closed_within(connection: socket.socket, seconds: float) -> bytes:
    """What the server sent before it closed the connection (an AssertionError when it had not
    closed it `seconds` later)."""
    connection.settimeout(seconds)
    received = b""
    try:
        while chunk := connection.recv(65536):
            received += chunk
    except TimeoutError:
        raise AssertionError(f"still open after {seconds} s; got {received[:200]!r}") from None
    except ConnectionResetError:
        pass
    return received


@pytest.fixture
def quick_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving, "HEAD_TIMEOUT_S", 1.0)
    monkeypatch.setattr(serving, "BODY_IDLE_S", 1.0)


def test_connections_that_send_nothing_half_a_head_or_half_a_body_are_closed(
    quick_timeouts: None, service: RunningService, caplog: pytest.LogCaptureFixture
) -> None:
    idle, half_head, half_body = _raw(service), _raw(service), _raw(service)
    half_head.sendall(b"GET /druid/indexer/v1/supervisor HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    half_body.sendall(
        b"POST /druid/indexer/v1/supervisor HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"type": '
    )
    with idle, half_head, half_body:
        assert _closed_within(idle, 10) == b""
        assert _closed_within(half_head, 10) == b""
        assert _closed_within(half_body, 10) == b""  # the route saw its client leave
    # nothing of it was an error, and nothing was written
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    with httpx.Client(base_url=service.url, timeout=30) as api:
        assert api.get(BASE).json() == []


def test_a_client_that_leaves_mid_body_is_not_an_error(
    service: RunningService, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="supervisor.api.guard")
    with _raw(service) as leaving:
        leaving.sendall(
            b"POST /druid/indexer/v1/supervisor HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 50000\r\n\r\n" + b" " * 5000
        )
        time.sleep(0.5)  # the route is reading the body
    time.sleep(0.5)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("left before its body arrived" in r.getMessage() for r in caplog.records)


def test_a_head_larger_than_druids_limit_is_431(service: RunningService) -> None:
    with httpx.Client(base_url=service.url, timeout=30) as api:
        assert api.get(BASE, headers={"x-pad": "a" * 7000}).status_code == 200
        assert api.get("/status/health", params={"q": "b" * 3000}).status_code == 200
    for head in (b"X-Pad: " + b"a" * 200_000 + b"\r\n", b"X-Pad: a\r\n" * 2000):
        with _raw(service) as big:
            big.sendall(b"GET /status/health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + head + b"\r\n")
            answer = _closed_within(big, 10)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]


def test_files_holding_secrets_are_the_owners_only(tmp_path: Path) -> None:
    database = tmp_path / "metadata.db"  # (PostgreSQL keeps its own files)
    with RunningService(Settings(metadata_url=f"sqlite:///{database}", run_supervisors=False)):
        pass
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    # a process the overlord starts (a host application, a task) logs to a file of its own
    child = spawn(["sh", "-c", "echo started"], tmp_path, tmp_path / "app.log")
    assert child.wait(30) == 0
    assert stat.S_IMODE((tmp_path / "app.log").stat().st_mode) == 0o600
    assert (tmp_path / "app.log").read_text() == "started\n"


def test_the_docs_page_loads_nothing_from_elsewhere(api: httpx.Client) -> None:
    page = api.get("/docs")
    assert page.status_code == 200
    assert not re.findall(r"(?:src|href)=[\"'](?:https?:)?//", page.text), page.text
    for asset in re.findall(r"(?:src|href)=[\"'](/docs/assets/[^\"']+)", page.text):
        assert api.get(asset).status_code == 200, asset
    assert "swagger-ui-bundle.js" in page.text
    assert api.get("/redoc").status_code == 404  # Redoc fetched its fonts from Google


# -- not yet tried before: TLS versions and ciphers -----------------------------------------


def _handshake(port: int, ca: Path, **options: Any) -> str | None:
    """The protocol a client limited by `options` agrees with the server (None: refused)."""
    context = ssl.create_default_context(cafile=str(ca))
    with warnings.catch_warnings():  # the old versions are what is tried
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        context.maximum_version = options.get("maximum", ssl.TLSVersion.MAXIMUM_SUPPORTED)
    # the client offers anything its OpenSSL can (security level 0): what is refused, the
    # server refused
    context.set_ciphers(options.get("ciphers", "ALL") + ":@SECLEVEL=0")
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            return tls.version()
    except (ssl.SSLError, ConnectionResetError):
        return None


def test_tls_takes_only_versions_and_ciphers_without_known_weaknesses(tmp_path: Path) -> None:
    certs = self_signed(tmp_path / "tls")
    settings = Settings(
        metadata_url=f"sqlite:///{tmp_path / 'm.db'}",
        run_supervisors=False,
        tls_cert=certs.cert,
        tls_key=certs.key,
    )
    with RunningService(settings) as service:
        port = service.port
        assert _handshake(port, certs.ca) == "TLSv1.3"
        tls12 = ssl.TLSVersion.TLSv1_2
        assert _handshake(port, certs.ca, maximum=tls12) == "TLSv1.2"  # forward-secret AEAD
        assert _handshake(port, certs.ca, maximum=ssl.TLSVersion.TLSv1_1) is None
        assert _handshake(port, certs.ca, maximum=ssl.TLSVersion.TLSv1) is None
        # TLS 1.2 in CBC mode (with SHA-1 or SHA-384: both agreed by a permissive server with
        # this EC certificate): refused
        for weak in ("ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384"):
            assert _handshake(port, certs.ca, maximum=tls12, ciphers=weak) is None, weak


# -- the task host's own API (`sluicegate worker`) under the same probes ----------------------


def test_a_task_hosts_api_answers_its_overlords_token_only(jar_cache: Path, tmp_path: Path) -> None:
    """Every route but health wants the host's token (Bearer), refused the same whether the
    task it names exists or not; with the token, a task id that is a path is a 400, a form is
    a 415 and a head past Druid's limit a 431, as on the overlord."""
    settings = task_settings(tmp_path, jar_cache, worker_timeout_s=5)
    with (
        RunningService(settings) as service,
        task_host(service.url, tmp_path / "host") as (host, _),
        httpx.Client(base_url=f"http://{host}", timeout=30) as worker,
    ):
        token = (tmp_path / "host" / "worker-token").read_text().strip()
        assert stat.S_IMODE((tmp_path / "host" / "worker-token").stat().st_mode) == 0o600
        assert worker.get("/status/health").json() is True
        routes = [
            ("GET", "/druid/worker/v1/enabled"),
            ("GET", "/druid/worker/v1/tasks"),
            ("GET", "/druid-internal/v1/worker"),
            ("POST", "/druid-internal/v1/worker/assignTask"),
        ]
        for task_id in ("index_kafka_nobody_0", "..."):
            routes += [
                ("POST", f"/druid/worker/v1/task/{task_id}/shutdown"),
                ("GET", f"/druid/worker/v1/task/{task_id}/log"),
                ("GET", f"/druid-internal/v1/worker/task/{task_id}/report"),
            ]
        wrong = [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {token}x"}]
        wrong.append({"Authorization": "Basic YWRtaW46YWRtaW4="})  # an overlord login
        for method, path in routes:
            for headers in wrong:
                refused = worker.request(method, path, headers=headers, json={})
                assert (refused.status_code, refused.json()) == (
                    401,
                    {"detail": "this task host answers its overlords only"},
                ), (method, path, headers)
        mine = {"Authorization": f"Bearer {token}"}
        assert worker.get("/druid/worker/v1/tasks", headers=mine).json() == []
        # a task id is a file name on the host: one that walks out of the tasks' directory is
        # no task id (a path with / in it matches no route at all)
        for task_id in ("...", ".hidden", "..%2F..%2Fworker-token"):
            for route in (
                "/druid/worker/v1/task/{}/log",
                "/druid-internal/v1/worker/task/{}/report",
            ):
                answer = worker.get(route.format(task_id), headers=mine)
                assert answer.status_code in (400, 404) and token not in answer.text, task_id
        dots = worker.get("/druid/worker/v1/task/.../log", headers=mine)
        assert (dots.status_code, dots.json()["detail"][:9]) == (400, "task id: ")
        unknown = worker.get("/druid/worker/v1/task/index_kafka_nobody_0/log", headers=mine)
        assert unknown.status_code == 404
        bad = worker.post("/druid-internal/v1/worker/assignTask", headers=mine, json={})
        assert bad.status_code == 400 and bad.json()["error"].startswith("type:")
        form = {**mine, "Content-Type": "application/x-www-form-urlencoded"}
        for path in (
            "/druid-internal/v1/worker/assignTask",
            "/druid/worker/v1/task/index_kafka_nobody_0/shutdown",
        ):
            assert worker.post(path, headers=form, content=b"").status_code == 415, path
        shut = worker.post("/druid/worker/v1/task/index_kafka_nobody_0/shutdown", headers=mine)
        assert shut.json() == {"task": "index_kafka_nobody_0", "killed": False}
        port = int(host.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as big:
            big.sendall(
                b"GET /status/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
                + b"a" * 200_000
                + b"\r\n\r\n"
            )
            answer = _closed_within(big, 10)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
