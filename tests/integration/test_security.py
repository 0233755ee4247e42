"""The service as an attacker meets it (issue 21): every finding of that review, on the real
service and metadata DB (SQLite and PostgreSQL), answered with a 4xx that names the field and
loses nothing; never a 500."""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

import httpx
import pytest

from supervisor.db.repositories import _payloads
from supervisor.lru import Lru
from supervisor.schemas import spec as spec_module
from supervisor.services import history as history_module
from supervisor.services import spec_input as spec_input_module
from supervisor.testkit.service import RunningService
from tests.specs import spec, task

BASE = "/druid/indexer/v1/supervisor"
JSON = {"content-type": "application/json"}


def post_raw(api: httpx.Client, path: str, body: bytes | str, **headers: str) -> httpx.Response:
    return api.post(path, content=body, headers={**JSON, **headers})


def test_a_write_that_is_not_json_is_415_and_changes_nothing(api: httpx.Client) -> None:
    # a web page can send text/plain anywhere without a preflight
    body = json.dumps(spec("wiki"))
    sent = api.post(BASE, content=body, headers={"content-type": "text/plain"})
    assert sent.status_code == 415
    assert sent.json()["field"] == "Content-Type"
    assert api.post(BASE, content=body).status_code == 415  # no Content-Type at all
    assert api.get(BASE).json() == []
    json_with_charset = api.post(
        BASE, content=body, headers={"content-type": "application/json; charset=utf-8"}
    )
    assert json_with_charset.json() == {"id": "wiki"}


def test_writes_from_another_sites_page_are_refused(api: httpx.Client) -> None:
    assert api.post(BASE, json=spec("wiki")).status_code == 200
    evil = {"origin": "http://evil.example"}
    assert api.post(BASE, json=spec("other"), headers=evil).status_code == 403
    # a form posted across sites needs no body at all
    form = api.post(f"{BASE}/terminateAll", headers={"sec-fetch-site": "cross-site"})
    assert form.status_code == 403
    assert api.post(f"{BASE}/terminateAll", headers=evil).json()["field"] == "Origin"
    assert api.get(BASE).json() == ["wiki"]
    # the console's own page (same origin) writes
    own = {"origin": str(api.base_url).rstrip("/")}
    assert api.post(f"{BASE}/wiki/suspend", headers=own).status_code == 200
    assert api.get(BASE, headers=evil).status_code == 200  # reads answer (CORS keeps them)


def test_a_host_header_this_service_does_not_answer_to_is_400(api: httpx.Client) -> None:
    # DNS rebinding: evil.example resolving to 127.0.0.1 reaches the port with its own Host
    refused = api.get(BASE, headers={"host": "evil.example"})
    assert refused.status_code == 400
    assert refused.json()["field"] == "Host"
    port = api.base_url.port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert api.get(BASE, headers={"host": host}).status_code == 200, host


def test_hosts_the_operator_allows(settings: Any) -> None:
    settings.allowed_hosts = "sluicegate.internal"
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30) as api,
    ):
        assert api.get(BASE, headers={"host": "sluicegate.internal:8090"}).status_code == 200
        assert api.get(BASE, headers={"host": "evil.example"}).status_code == 400


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/druid/indexer/v1/task/a%00b", "path"),  # a NUL: PostgreSQL refuses it as a 500
        ("/druid/indexer/v1/task/a%0Ab/status", "path"),
        (f"{BASE}/a%00b/status", "path"),
        ("/druid/indexer/v1/tasks?max=100000000000000000000", "max"),
        (f"{BASE}/wiki/history?count=100000000000000000000", "count"),
        (f"{BASE}/history?count=100000000000000000000", "count"),
    ],
)
def test_paths_and_numbers_out_of_range_are_400(api: httpx.Client, path: str, field: str) -> None:
    response = api.get(path)
    assert response.status_code == 400, response.text
    assert field in response.text


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[" * 30_000 + b"]" * 30_000, "nested deeper than 64"),  # was a RecursionError
        (b"[" * 65 + b"]" * 65, "nested deeper than 64"),
        (b'{"type": "kafka", "x": ' + b"9" * 5000 + b"}", "does not fit in 64 bits"),
        (b'{"type": "kafka", "x": NaN}', "NaN is not JSON"),
        (b'{"type": "kafka", "x": 1e400}', "out of range"),
        (b'{"type": "kafka", "x": -Infinity}', "-Infinity is not JSON"),
    ],
)
def test_bodies_a_parser_chokes_on_are_400(api: httpx.Client, body: bytes, reason: str) -> None:
    response = post_raw(api, BASE, body)
    assert response.status_code == 400, response.text[:200]
    assert reason in response.json()["error"]
    # the connection is still good (a 500 used to reset it)
    assert api.get(BASE).status_code == 200


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ("taskDuration", "P2147483647D", "longer than 36500 days"),
        ("taskDuration", "PT99999999999999999999S", "longer than"),
        ("taskCount", 10**30, "does not fit in 64 bits"),
        ("taskCount", True, "not true or false"),
        ("replicas", 2**40, "less than or equal to"),
    ],
)
def test_spec_values_the_service_cannot_run_are_refused_at_submit(
    api: httpx.Client, path: str, value: Any, reason: str
) -> None:
    # a taskDuration of P2147483647D was accepted, then its /status and /health were 500
    response = api.post(BASE, json=spec("wiki", **{path: value}))
    assert response.status_code == 400, response.text
    assert reason in response.json()["error"]
    assert api.get(BASE).json() == []


@pytest.mark.parametrize(
    "name", ["a\nb", "a\x00b", "x" * 10_000, "\u202e", " ", "history", "suspendAll", "a b"]
)
def test_ids_and_datasources_outside_the_safe_set_are_refused(api: httpx.Client, name: str) -> None:
    with_id = spec("wiki")
    with_id["id"] = name
    assert api.post(BASE, json=with_id).status_code == 400
    response = api.post(BASE, json=spec(name))
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "spec.dataSchema.dataSource"
    assert api.get(BASE).json() == []


def _versions(api: httpx.Client, supervisor_id: str) -> list[bool]:
    history = api.get(f"{BASE}/{supervisor_id}/history").json()
    return [entry["spec"].get("suspended", False) for entry in reversed(history)]


def _at_once(calls: list[Any]) -> list[int]:
    barrier = threading.Barrier(len(calls))
    codes: list[int] = [0] * len(calls)

    def run(index: int) -> None:
        barrier.wait()
        codes[index] = calls[index]().status_code

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return codes


def test_suspend_resume_and_create_are_atomic(service: RunningService) -> None:
    def client() -> httpx.Client:
        return httpx.Client(base_url=service.url, timeout=60)

    clients = [client() for _ in range(6)]
    try:
        codes = _at_once([lambda c=c: c.post(BASE, json=spec("wiki")) for c in clients])
        assert codes == [200] * 6
        audit = clients[0].get(f"{BASE}/wiki/history").json()
        assert [entry["spec"]["id"] for entry in audit] == ["wiki"] * 6
        codes = _at_once([lambda c=c: c.post(f"{BASE}/wiki/suspend") for c in clients])
        assert sorted(codes) == [200] + [400] * 5, codes  # one suspends; five find it so
        codes = _at_once(
            [
                lambda c=c, i=i: c.post(f"{BASE}/wiki/{'resume' if i % 2 else 'suspend'}")
                for i, c in enumerate(clients)
            ]
        )
        states = _versions(clients[0], "wiki")
        assert all(a != b for a, b in itertools.pairwise(states[5:])), states
    finally:
        for c in clients:
            c.close()


def test_one_create_in_the_audit_log_for_racing_creates(service: RunningService) -> None:
    from sqlalchemy import select

    from supervisor.db.models import AuditRow
    from supervisor.testkit.service import db_rows

    clients = [httpx.Client(base_url=service.url, timeout=60) for _ in range(4)]
    try:
        assert _at_once([lambda c=c: c.post(BASE, json=spec("wiki")) for c in clients]) == [200] * 4
    finally:
        for c in clients:
            c.close()
    actions = [row[0] for row in db_rows(service, select(AuditRow.action))]
    assert actions.count("create") == 1 and actions.count("update") == 3, actions


def test_history_is_paged_and_bounded(api: httpx.Client, monkeypatch: Any) -> None:
    for count in range(1, 6):
        api.post(BASE, json=spec("wiki", taskCount=count))
    newest = api.get(f"{BASE}/wiki/history", params={"count": 2}).json()
    assert [v["spec"]["spec"]["ioConfig"]["taskCount"] for v in newest] == [5, 4]
    every = api.get(f"{BASE}/history", params={"count": 3}).json()
    assert len(every["wiki"]) == 3
    assert "x-sluicegate-truncated" not in api.get(f"{BASE}/wiki/history").headers
    size = len(json.dumps(spec("wiki")))
    monkeypatch.setattr(history_module, "HISTORY_BYTES", int(size * 2.5))
    cut = api.get(f"{BASE}/wiki/history")
    assert cut.headers["x-sluicegate-truncated"] == "true"
    assert 1 <= len(cut.json()) < 5
    assert api.get(f"{BASE}/history").headers["x-sluicegate-truncated"] == "true"


def test_big_spec_versions_do_not_grow_the_caches_past_their_bytes(
    settings: Any, monkeypatch: Any
) -> None:
    # 21 versions just under the body limit took the service from 121 to 410 MB
    bound = 3 * 1024 * 1024
    checked: Lru[Any, Any] = Lru(1024, bound)
    stored: Lru[Any, Any] = Lru(4096, bound)
    monkeypatch.setattr(spec_input_module, "checked_specs", checked)
    monkeypatch.setattr(spec_module, "_stored", stored)
    settings.max_request_bytes = 4 * 1024 * 1024
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=60) as api,
    ):
        for version in range(6):
            body = spec("wiki", taskCount=version + 1)
            body["spec"]["ioConfig"]["padding"] = "x" * 900_000
            assert api.post(BASE, json=body).status_code == 200
            assert api.get(f"{BASE}/wiki/status").status_code == 200
    assert 0 < checked.weight <= bound and stored.weight <= bound
    caches = list(_payloads.__globals__["_payload_caches"].values())
    assert caches and all(cache.weight <= cache.max_weight for cache in caches)


# -- secrets: masked everywhere, never sent anywhere new on the strength of a mask ----------

SECRET_PROPS = {
    "bootstrap.servers": "127.0.0.1:9092",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.client.id": "sluicegate",
    "sasl.oauthbearer.client.secret": "oauth-secret",
    "ssl.key.pem": "-----BEGIN PRIVATE KEY-----pem-secret",
    "sasl.oauthbearer.config": "principal=admin extension_secret=oauthcfg-secret",
    "nested": {"deeper": {"password": "nested-secret"}},
    "druid.dynamic.config.provider": {
        "type": "environment",
        "variables": {"sasl.password": "SG_TEST_KAFKA_PASSWORD"},
    },
}
IN_CLEAR = ("oauth-secret", "pem-secret", "oauthcfg-secret", "nested-secret")


@pytest.fixture
def open_env(settings: Any) -> Any:
    """A service that lets specs name SG_TEST_* environment variables."""
    settings.spec_environment = "SG_TEST_.*"
    return settings


def test_every_secret_is_masked_at_any_depth(open_env: Any) -> None:
    with (
        RunningService(open_env) as service,
        httpx.Client(base_url=service.url, timeout=30) as api,
    ):
        assert api.post(BASE, json=spec("wiki", consumerProperties=SECRET_PROPS)).status_code == 200
        api.post(f"{BASE}/wiki/suspend")
        for path in (
            f"{BASE}/wiki",
            f"{BASE}?full",
            f"{BASE}?system",
            f"{BASE}/wiki/history",
            f"{BASE}/history",
        ):
            text = api.get(path).text
            assert not [s for s in IN_CLEAR if s in text], path
        props = api.get(f"{BASE}/wiki").json()["spec"]["ioConfig"]["consumerProperties"]
        assert props["nested"] == {"deeper": {"password": "<masked>"}}
        assert props["sasl.oauthbearer.client.id"] == "sluicegate"  # not a secret
        # the provider names variables, not secrets: shown as given
        assert (
            props["druid.dynamic.config.provider"] == SECRET_PROPS["druid.dynamic.config.provider"]
        )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("sasl.oauthbearer.token.endpoint.url", "http://127.0.0.1:9/steal"),
        ("bootstrap.servers", "evil.example:9092"),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("ssl.endpoint.identification.algorithm", ""),
        ("ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----attacker's CA"),
    ],
)
def test_a_mask_sent_back_with_a_new_destination_is_refused(
    open_env: Any, key: str, value: str
) -> None:
    # re-POSTing the masked spec with only the token URL changed sent the real secret there
    open_env.allowed_consumer_properties = "sasl.oauthbearer.token.endpoint.url"
    with (
        RunningService(open_env) as service,
        httpx.Client(base_url=service.url, timeout=30) as api,
    ):
        api.post(BASE, json=spec("wiki", consumerProperties=SECRET_PROPS))
        fetched = api.get(f"{BASE}/wiki").json()
        fetched["spec"]["ioConfig"]["consumerProperties"][key] = value
        refused = api.post(BASE, json=fetched)
        assert refused.status_code == 400, refused.text
        assert f"consumerProperties.{key}: changed while" in refused.json()["error"]
        assert len(api.get(f"{BASE}/wiki/history").json()) == 1
        # with the secrets sent again it is an ordinary update
        fetched["spec"]["ioConfig"]["consumerProperties"].update(
            {
                k: v
                for k, v in SECRET_PROPS.items()
                if k
                in (
                    "sasl.oauthbearer.client.secret",
                    "ssl.key.pem",
                    "sasl.oauthbearer.config",
                    "nested",
                )
            }
        )
        assert api.post(BASE, json=fetched).status_code == 200
        # and an update that changes nothing of where secrets go keeps the masked ones
        again = api.get(f"{BASE}/wiki").json()
        again["spec"]["ioConfig"]["taskCount"] = 3
        assert api.post(BASE, json=again).status_code == 200


@pytest.mark.parametrize(
    "key",
    [
        "ssl.ca.location",  # the service (as root) read /etc/shadow as a CA
        "ssl.engine.location",  # loads a shared library
        "sasl.kerberos.kinit.cmd",  # runs a command
        "sasl.oauthbearer.token.endpoint.url",  # POSTs anywhere
        "plugin.library.paths",
        "ssl.truststore.location",
        "sasl.login.callback.handler.class",
        "config.providers",
    ],
)
def test_properties_that_act_on_the_service_are_refused_unless_allowed(
    settings: Any, key: str
) -> None:
    props = {"bootstrap.servers": "127.0.0.1:9092", key: "/etc/shadow"}
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30) as api,
    ):
        refused = api.post(BASE, json=spec("wiki", consumerProperties=props))
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["field"] == f"spec.ioConfig.consumerProperties.{key}"
        assert "SLUICEGATE_ALLOWED_CONSUMER_PROPERTIES" in refused.json()["error"]
        task_refused = api.post("/druid/indexer/v1/task", json=task("t1", props))
        assert task_refused.status_code == 400, task_refused.text
        assert key in task_refused.json()["error"]
    settings.allowed_consumer_properties = f"{key.split('.')[0]}.*"
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30) as api,
    ):
        assert api.post(BASE, json=spec("wiki", consumerProperties=props)).status_code == 200


def test_a_kerberos_login_module_is_refused_and_scram_is_not(api: httpx.Client) -> None:
    kerberos = 'com.sun.security.auth.module.Krb5LoginModule required keyTab="/etc/krb5.keytab";'
    scram = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="p";'
    )
    props = {"bootstrap.servers": "127.0.0.1:9092", "sasl.jaas.config": kerberos}
    assert api.post(BASE, json=spec("wiki", consumerProperties=props)).status_code == 400
    props["sasl.jaas.config"] = scram
    assert api.post(BASE, json=spec("wiki", consumerProperties=props)).status_code == 200


def test_the_dynamic_config_provider_names_only_allowed_variables(settings: Any) -> None:
    props = {
        "bootstrap.servers": "127.0.0.1:9092",
        "druid.dynamic.config.provider": {
            "type": "environment",
            "variables": {"sasl.password": "SLUICEGATE_ADMIN_PASSWORD"},
        },
    }
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30) as api,
    ):
        refused = api.post(BASE, json=spec("wiki", consumerProperties=props))
        assert refused.status_code == 400
        assert "SLUICEGATE_SPEC_ENVIRONMENT" in refused.json()["error"]
        props["druid.dynamic.config.provider"] = {"type": "file", "path": "/etc/shadow"}
        assert api.post(BASE, json=spec("wiki", consumerProperties=props)).status_code == 400


@pytest.mark.parametrize(
    "props",
    [
        # librdkafka fills in Azure's metadata URL itself and fetches the host's token
        {"sasl.oauthbearer.metadata.authentication.type": "azure_imds"},
        {"sasl.oauthbearer.assertion.file": "/etc/shadow"},
        {"sasl.oauthbearer.assertion.private.key.file": "/etc/shadow"},
        {"security.providers": "com.example.Evil"},
        {"partition.assignment.strategy": "com.example.Evil"},
        # the provider may fill in secrets only: client.id is logged by librdkafka
        {
            "druid.dynamic.config.provider": {
                "type": "environment",
                "variables": {"client.id": "SG_TEST_SECRET"},
            }
        },
        {
            "druid.dynamic.config.provider": {
                "type": "environment",
                "variables": {"ssl.ca.location": "SG_TEST_SECRET"},
            }
        },
    ],
)
def test_more_properties_that_act_on_the_service_are_refused(
    open_env: Any, props: dict[str, Any]
) -> None:
    with (
        RunningService(open_env) as service,
        httpx.Client(base_url=service.url, timeout=30) as api,
    ):
        body = spec("wiki", consumerProperties={"bootstrap.servers": "127.0.0.1:9092", **props})
        assert api.post(BASE, json=body).status_code == 400
