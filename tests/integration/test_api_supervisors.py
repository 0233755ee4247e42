"""The Druid-compatible supervisor API on a real server, against SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import select

from supervisor.db.models import (
    AuditRow,
    CommittedOffsetsRow,
    IntentRow,
    OffsetGenerationRow,
    SupervisorSpecRow,
)
from supervisor.schemas.secrets import MASK
from supervisor.testkit.service import RunningService, db_rows
from tests.specs import spec

BASE = "/druid/indexer/v1/supervisor"


def latest_stored_spec(service: RunningService) -> dict[str, Any]:
    query = select(SupervisorSpecRow.payload).order_by(SupervisorSpecRow.id.desc()).limit(1)
    payload: dict[str, Any] = db_rows(service, query)[0][0]
    return payload


def submit(api: httpx.Client, body: dict, **params: str) -> httpx.Response:
    return api.post(BASE, json=body, params=params)


def test_create_get_and_list(api: httpx.Client) -> None:
    response = submit(api, spec("wiki"))
    assert response.status_code == 200
    assert response.json() == {"id": "wiki"}
    stored = api.get(f"{BASE}/wiki").json()
    assert stored["id"] == "wiki"
    assert stored["spec"]["ioConfig"]["topic"] == "wiki-edits"
    assert stored["spec"]["ioConfig"]["taskCount"] == 1
    assert stored["spec"]["tuningConfig"]["maxRowsInMemory"] == 150_000
    assert api.get(BASE).json() == ["wiki"]


def test_explicit_id_differs_from_datasource(api: httpx.Client) -> None:
    body = spec("wiki")
    body["id"] = "wiki-from-cluster-b"
    assert submit(api, body).json() == {"id": "wiki-from-cluster-b"}
    assert submit(api, spec("wiki")).json() == {"id": "wiki"}
    assert api.get(BASE).json() == ["wiki", "wiki-from-cluster-b"]


def test_list_variants(api: httpx.Client) -> None:
    submit(api, spec("a"))
    submit(api, spec("b", taskCount=2))
    api.post(f"{BASE}/b/suspend")
    full = api.get(f"{BASE}?full").json()
    assert [entry["id"] for entry in full] == ["a", "b"]
    assert full[1]["spec"]["spec"]["ioConfig"]["taskCount"] == 2
    assert full[1]["state"] == "SUSPENDED"
    assert full[0]["state"] == full[0]["detailedState"] == "PENDING"
    states = api.get(BASE, params={"state": "true"}).json()
    assert states == [
        {
            "id": "a",
            "state": "PENDING",
            "detailedState": "PENDING",
            "healthy": True,
            "dataSource": "a",
            "suspended": False,
        },
        {
            "id": "b",
            "state": "SUSPENDED",
            "detailedState": "SUSPENDED",
            "healthy": True,
            "dataSource": "b",
            "suspended": True,
        },
    ]
    system = api.get(f"{BASE}?system").json()
    assert system[0]["type"] == "kafka"
    assert system[0]["source"] == "wiki-edits"
    assert json.loads(system[0]["specString"])["id"] == "a"


def test_update_appends_history_and_skip_if_unmodified(api: httpx.Client) -> None:
    submit(api, spec("wiki"))
    submit(api, spec("wiki", taskCount=3))
    assert api.get(f"{BASE}/wiki").json()["spec"]["ioConfig"]["taskCount"] == 3
    assert len(api.get(f"{BASE}/wiki/history").json()) == 2
    # unchanged + skip: no new version; unchanged without skip: a new version (Druid restarts it)
    assert submit(api, spec("wiki", taskCount=3), skipRestartIfUnmodified="true").status_code == 200
    assert len(api.get(f"{BASE}/wiki/history").json()) == 2
    submit(api, spec("wiki", taskCount=3))
    assert len(api.get(f"{BASE}/wiki/history").json()) == 3
    # changed + skip: a new version
    submit(api, spec("wiki", taskCount=4), skipRestartIfUnmodified="true")
    history = api.get(f"{BASE}/wiki/history").json()
    assert [v["spec"]["spec"]["ioConfig"]["taskCount"] for v in history] == [4, 3, 3, 1]
    assert all(v["version"].endswith("Z") for v in history)
    assert [v["version"] for v in api.get(f"{BASE}/wiki/history", params={"count": 2}).json()] == [
        v["version"] for v in history[:2]
    ]


def test_update_may_not_change_the_stream(api: httpx.Client) -> None:
    submit(api, spec("wiki"))
    moved = submit(api, spec("wiki", topic="other"))
    assert moved.status_code == 400
    assert (
        "spec.ioConfig.topic: cannot change from 'wiki-edits' to 'other'" in moved.json()["error"]
    )
    switched = spec("wiki")
    del switched["spec"]["ioConfig"]["topic"]
    switched["spec"]["ioConfig"]["topicPattern"] = "wiki-.*"
    response = submit(api, switched)
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "field": "spec.ioConfig.topic",
            "reason": "cannot switch between topic and topicPattern on update; "
            "terminate the supervisor and submit a new one",
        }
    ]
    assert api.get(f"{BASE}/wiki").json()["spec"]["ioConfig"]["topic"] == "wiki-edits"


def pattern_spec(pattern: str = "wiki-.*", **io: Any) -> dict[str, Any]:
    body = spec("multi", **io)
    del body["spec"]["ioConfig"]["topic"]
    body["spec"]["ioConfig"]["topicPattern"] = pattern
    return body


def test_topic_pattern_supervisor_and_its_updates(api: httpx.Client) -> None:
    assert submit(api, pattern_spec()).json() == {"id": "multi"}
    assert api.get(f"{BASE}/multi").json()["spec"]["ioConfig"]["topicPattern"] == "wiki-.*"
    assert submit(api, pattern_spec(taskCount=3)).status_code == 200
    moved = submit(api, pattern_spec("edits-.*"))
    assert moved.status_code == 400
    assert moved.json()["errors"][0]["field"] == "spec.ioConfig.topicPattern"
    listed = api.get(BASE, params={"system": "true"}).json()
    assert [entry["source"] for entry in listed] == ["wiki-.*"]


def test_suspend_and_resume(api: httpx.Client) -> None:
    submit(api, spec("wiki"))
    suspended = api.post(f"{BASE}/wiki/suspend")
    assert suspended.status_code == 200
    assert suspended.json()["suspended"] is True
    again = api.post(f"{BASE}/wiki/suspend")
    assert again.status_code == 400
    assert again.json()["error"] == "[wiki] is already suspended"
    resumed = api.post(f"{BASE}/wiki/resume")
    assert resumed.status_code == 200 and resumed.json()["suspended"] is False
    assert api.post(f"{BASE}/wiki/resume").json()["error"] == "[wiki] is already running"
    history = api.get(f"{BASE}/wiki/history").json()
    assert [v["spec"]["suspended"] for v in history] == [False, True, False]


def test_submitting_a_suspended_spec(api: httpx.Client) -> None:
    body = spec("wiki")
    body["suspended"] = True
    submit(api, body)
    assert api.get(BASE, params={"state": "true"}).json()[0]["state"] == "SUSPENDED"


def test_bulk_endpoints(api: httpx.Client) -> None:
    for name in ("a", "b", "c"):
        submit(api, spec(name))
    api.post(f"{BASE}/a/suspend")
    assert api.post(f"{BASE}/suspendAll").json() == {"status": "success"}
    assert {e["state"] for e in api.get(BASE, params={"state": "true"}).json()} == {"SUSPENDED"}
    assert len(api.get(f"{BASE}/a/history").json()) == 2  # already suspended: no new version
    assert api.post(f"{BASE}/resumeAll").json() == {"status": "success"}
    assert {e["state"] for e in api.get(BASE, params={"state": "true"}).json()} == {"PENDING"}
    assert api.post(f"{BASE}/terminateAll").json() == {"status": "success"}
    assert api.get(BASE).json() == []


def test_terminate_writes_a_tombstone_and_shutdown_is_an_alias(api: httpx.Client) -> None:
    submit(api, spec("a"))
    submit(api, spec("b"))
    assert api.post(f"{BASE}/a/terminate").json() == {"id": "a"}
    assert api.post(f"{BASE}/b/shutdown").json() == {"id": "b"}
    assert api.get(BASE).json() == []
    assert api.get(f"{BASE}/a").status_code == 404
    history = api.get(f"{BASE}/a/history").json()
    assert history[0]["spec"]["type"] == "NoopSupervisorSpec"
    assert history[0]["spec"]["dataSources"] == ["a"]
    assert api.post(f"{BASE}/a/terminate").status_code == 404
    # a terminated id can be submitted again, and its history goes on
    submit(api, spec("a"))
    assert api.get(BASE).json() == ["a"]
    assert len(api.get(f"{BASE}/a/history").json()) == 3


def test_all_history(api: httpx.Client) -> None:
    submit(api, spec("a"))
    submit(api, spec("b"))
    submit(api, spec("a", taskCount=2))
    history = api.get(f"{BASE}/history").json()
    assert sorted(history) == ["a", "b"]
    assert [v["spec"]["spec"]["ioConfig"]["taskCount"] for v in history["a"]] == [2, 1]


def test_unknown_ids_are_404(api: httpx.Client) -> None:
    for method, path in [
        ("GET", f"{BASE}/nope"),
        ("GET", f"{BASE}/nope/history"),
        ("POST", f"{BASE}/nope/suspend"),
        ("POST", f"{BASE}/nope/resume"),
        ("POST", f"{BASE}/nope/terminate"),
        ("POST", f"{BASE}/nope/shutdown"),
    ]:
        response = api.request(method, path)
        assert response.status_code == 404, (method, path)
        assert "nope" in response.json()["error"]


def test_validation_errors_are_400_naming_the_field(api: httpx.Client) -> None:
    response = submit(api, spec("wiki", taskCount=0, taskDuration="an hour"))
    assert response.status_code == 400
    body = response.json()
    fields = {e["field"]: e["reason"] for e in body["errors"]}
    assert "greater than or equal to 1" in fields["spec.ioConfig.taskCount"]
    assert "not an ISO-8601 period" in fields["spec.ioConfig.taskDuration"]
    assert "spec.ioConfig.taskCount" in body["error"]
    assert api.get(BASE).json() == []


def test_bad_bodies_are_400_or_413_never_500(api: httpx.Client) -> None:
    cases = [
        (b"{not json", 400, "body: malformed JSON"),
        (b"", 400, "body: is empty"),
        (b"\xff\xfe", 400, "body: is not UTF-8"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (b'{"type": "kinesis"}', 400, "type: unsupported supervisor type 'kinesis'"),
        (b'{"type": "kafka"}', 400, "spec: Field required"),
        (b'{"type": "kafka", "spec": []}', 400, "spec: Input should be a valid dictionary"),
        (b'"kafka"', 400, "must be a JSON object"),
        (json.dumps({"type": "kafka", "pad": "x" * 70_000}).encode(), 413, "larger than the limit"),
    ]
    for body, status, message in cases:
        response = api.post(BASE, content=body, headers={"content-type": "application/json"})
        assert response.status_code == status, (body[:40], response.text)
        assert message in response.json()["error"], response.json()


def test_body_over_the_limit_without_a_length_header(api: httpx.Client) -> None:
    def chunks():  # chunked transfer: no content-length to trust
        for _ in range(20):
            yield b" " * 8192

    response = api.post(BASE, content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_bad_query_parameters_are_400(api: httpx.Client) -> None:
    submit(api, spec("wiki"))
    response = api.get(f"{BASE}/wiki/history", params={"count": "many"})
    assert response.status_code == 400
    assert response.json()["error"].startswith("count:")
    assert api.get(f"{BASE}/wiki/history", params={"count": 0}).status_code == 400
    bad_flag = api.post(BASE, params={"skipRestartIfUnmodified": "perhaps"}, json=spec("wiki"))
    assert bad_flag.status_code == 400
    assert "skipRestartIfUnmodified" in bad_flag.json()["error"]


SECRETS = {
    "bootstrap.servers": "127.0.0.1:9092",
    "security.protocol": "SASL_SSL",
    "sasl.jaas.config": (
        'org.apache.kafka.common.security.plain.PlainLoginModule required password="hunter2";'
    ),
    "ssl.key.password": "k3y-pass",
    "ssl.keystore.password": "store-pass",
    "ssl.truststore.password": "trust-pass",
    "sasl.oauthbearer.client.secret": "oauth-secret",
}


def test_secrets_are_stored_but_masked_everywhere(
    api: httpx.Client, service: RunningService, caplog
) -> None:
    caplog.set_level("DEBUG")
    body = spec("wiki", consumerProperties=dict(SECRETS))
    submit(api, body)
    submit(api, spec("wiki", consumerProperties=dict(SECRETS), taskCount=2))
    api.post(f"{BASE}/wiki/suspend")
    responses = [
        api.get(f"{BASE}/wiki"),
        api.get(f"{BASE}?full"),
        api.get(f"{BASE}?system"),
        api.get(f"{BASE}/wiki/history"),
        api.get(f"{BASE}/history"),
        api.post(f"{BASE}/wiki/resume"),
    ]
    for response in responses:
        assert response.status_code == 200
        for secret in ("hunter2", "k3y-pass", "store-pass", "trust-pass", "oauth-secret"):
            assert secret not in response.text, response.request.url
    props = api.get(f"{BASE}/wiki").json()["spec"]["ioConfig"]["consumerProperties"]
    assert props["sasl.jaas.config"] == MASK
    assert props["security.protocol"] == "SASL_SSL"
    assert props["bootstrap.servers"] == "127.0.0.1:9092"
    assert "hunter2" not in caplog.text
    # stored as given
    payload = latest_stored_spec(service)
    audits = [row[0] for row in db_rows(service, select(AuditRow.payload))]
    assert payload["spec"]["ioConfig"]["consumerProperties"] == SECRETS
    assert audits and all("hunter2" not in json.dumps(a) for a in audits)


def test_resubmitting_a_masked_spec_keeps_the_secret(
    api: httpx.Client, service: RunningService
) -> None:
    submit(api, spec("wiki", consumerProperties=dict(SECRETS)))
    fetched = api.get(f"{BASE}/wiki").json()
    fetched["spec"]["ioConfig"]["taskCount"] = 5
    assert submit(api, fetched).status_code == 200
    payload = latest_stored_spec(service)
    assert (
        payload["spec"]["ioConfig"]["consumerProperties"]["sasl.jaas.config"]
        == SECRETS["sasl.jaas.config"]
    )
    assert payload["spec"]["ioConfig"]["taskCount"] == 5
    fresh = spec("other", consumerProperties={"bootstrap.servers": "x:1", "ssl.key.password": MASK})
    response = submit(api, fresh)
    assert response.status_code == 400
    assert "ssl.key.password: holds the placeholder" in response.json()["error"]


def test_changes_are_audited_with_author_and_comment(
    api: httpx.Client, service: RunningService
) -> None:
    api.post(BASE, json=spec("wiki"), headers={"X-Druid-Author": "ada", "X-Druid-Comment": "first"})
    api.post(f"{BASE}/wiki/suspend", headers={"X-Druid-Author": "grace"})
    api.post(f"{BASE}/wiki/terminate")
    rows = db_rows(service, select(AuditRow).order_by(AuditRow.id))
    assert [(r.action, r.author, r.comment) for r in rows] == [
        ("create", "ada", "first"),
        ("suspend", "grace", ""),
        ("terminate", "", ""),
    ]
    assert all(r.audit_key == "wiki" and r.remote_address == "127.0.0.1" for r in rows)


def test_service_status(api: httpx.Client) -> None:
    assert api.get("/status/health").json() is True
    assert "version" in api.get("/status").json()


def test_unsupported_pipeline_features_are_400(api: httpx.Client) -> None:
    body = spec("wiki")
    body["spec"]["dataSchema"]["metricsSpec"] = [
        {"type": "thetaSketch", "name": "u", "fieldName": "user"}
    ]
    response = submit(api, body)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "spec.dataSchema.metricsSpec[0].type"
    assert api.get(BASE).json() == []
    body = spec("wiki")
    body["spec"]["ioConfig"]["autoScalerConfig"] = {
        "enableTaskAutoScaler": True,
        "autoScalerStrategy": "costBased",
        "taskCountMin": 1,
        "taskCountMax": 2,
    }
    response = submit(api, body)
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error == {
        "field": "spec.ioConfig.autoScalerConfig.autoScalerStrategy",
        "reason": "'costBased' is not supported yet; use lagBased",
    }
    assert api.get(BASE).json() == []
    for bad in (-1, "lots", True):
        response = submit(api, {**spec("wiki"), "context": {"stageRows": bad}})
        assert response.status_code == 400
        (error,) = response.json()["errors"]
        assert error == {
            "field": "context.stageRows",
            "reason": "a whole number of records (0: never)",
        }
    assert api.get(BASE).json() == []


def committed_offsets(service: RunningService) -> dict[str, int] | None:
    rows = db_rows(service, select(CommittedOffsetsRow.offsets))
    return dict(rows[0][0]) if rows else None


def reset_body(offsets: dict[str, Any], stream: str = "wiki-edits") -> dict[str, Any]:
    return {
        "type": "kafka",
        "partitions": {"type": "end", "stream": stream, "partitionOffsetMap": offsets},
    }


def test_reset_offsets_merges_and_reset_forgets(api: httpx.Client, service: RunningService) -> None:
    submit(api, spec("wiki", taskCount=2))
    assert api.post(f"{BASE}/wiki/resetOffsets", json=reset_body({"0": 1200, "2": 77})).json() == {
        "id": "wiki"
    }
    assert committed_offsets(service) == {"0": 1200, "2": 77}
    api.post(f"{BASE}/wiki/resetOffsets", json=reset_body({"2": 80, "1": 5}))
    assert committed_offsets(service) == {"0": 1200, "1": 5, "2": 80}
    api.post(f"{BASE}/wiki/resetOffsets", json=reset_body({"1": 5}))  # (where it is already)
    assert api.post(f"{BASE}/wiki/reset").json() == {"id": "wiki"}
    assert committed_offsets(service) is None
    actions = [r[0] for r in db_rows(service, select(AuditRow.action).order_by(AuditRow.id))]
    assert actions == ["create", "resetOffsets", "resetOffsets", "resetOffsets", "reset"]
    # each that moved the offsets began a generation (its tasks name their segments with it)
    generations = select(OffsetGenerationRow.supervisor_id, OffsetGenerationRow.generation)
    assert db_rows(service, generations) == [("wiki", 3)]
    # each wrote the restart of its groups as an intent, pending: no leader loop runs here
    restarts = db_rows(service, select(IntentRow.kind, IntentRow.payload, IntentRow.done_at))
    assert restarts == [
        ("restart", {"groups": [0]}, None),
        ("restart", {"groups": [0, 1]}, None),
        ("restart", {"groups": [1]}, None),
        ("restart", {"groups": None}, None),
    ]


def test_reset_offsets_of_a_topic_pattern(api: httpx.Client, service: RunningService) -> None:
    submit(api, pattern_spec(taskCount=2))
    body = reset_body({"wiki-a:0": 10, "wiki-b:3": 7}, stream="wiki-.*")
    assert api.post(f"{BASE}/multi/resetOffsets", json=body).json() == {"id": "multi"}
    assert committed_offsets(service) == {"wiki-a:0": 10, "wiki-b:3": 7}
    cases = [
        (reset_body({"wiki-a:0": 1}), "partitions.stream", "topicPattern 'wiki-.*'"),
        (reset_body({"0": 1}, stream="wiki-.*"), "partitions.partitionOffsetMap.0", "topic:"),
        (
            reset_body({"other:1": 1}, stream="wiki-.*"),
            "partitions.partitionOffsetMap.other:1",
            "topic 'other' does not match the topicPattern 'wiki-.*'",
        ),
        (
            reset_body({"wiki-a:x": 1}, stream="wiki-.*"),
            "partitions.partitionOffsetMap.wiki-a:x",
            "",
        ),
    ]
    for case, field, reason in cases:
        response = api.post(f"{BASE}/multi/resetOffsets", json=case)
        assert response.status_code == 400, case
        assert response.json()["errors"][0]["field"] == field
        assert reason in response.json()["errors"][0]["reason"]
    assert committed_offsets(service) == {"wiki-a:0": 10, "wiki-b:3": 7}


def test_reset_offsets_errors(api: httpx.Client) -> None:
    submit(api, spec("wiki"))
    cases = [
        (reset_body({"0": 1}, stream="other"), "partitions.stream"),
        (reset_body({}), "partitions.partitionOffsetMap"),
        (reset_body({"x": 1}), "partitions.partitionOffsetMap.x"),
        (reset_body({"0": -1}), "partitions.partitionOffsetMap.0"),
        (reset_body({"0": "5"}), "partitions.partitionOffsetMap.0"),
        ({"type": "kinesis", "partitions": {}}, "type"),
        ({"type": "kafka"}, "partitions"),
    ]
    for body, field in cases:
        response = api.post(f"{BASE}/wiki/resetOffsets", json=body)
        assert response.status_code == 400, body
        assert response.json()["errors"][0]["field"] == field
    assert api.post(f"{BASE}/nope/resetOffsets", json=reset_body({"0": 1})).status_code == 404
    assert api.post(f"{BASE}/nope/reset").status_code == 404


def test_handoff_and_health(api: httpx.Client, service: RunningService) -> None:
    submit(api, spec("wiki", taskCount=2))
    who = {"X-Druid-Author": "carol", "X-Druid-Comment": "publish now"}
    body = {"taskGroupIds": [1, 0, 1]}
    assert api.post(f"{BASE}/wiki/taskGroups/handoff", json=body, headers=who).json() == {}
    asked = db_rows(
        service,
        select(IntentRow.owner, IntentRow.kind, IntentRow.payload, IntentRow.author)
        .where(IntentRow.comment == "publish now")
        .order_by(IntentRow.id),
    )
    assert asked == [("wiki", "handoff", {"group": g}, "carol") for g in (0, 1)]
    for body in ({"taskGroupIds": []}, {}, {"taskGroupIds": ["a"]}, {"taskGroupIds": [-1]}):
        response = api.post(f"{BASE}/wiki/taskGroups/handoff", json=body)
        assert response.status_code == 400
        assert response.json()["errors"][0]["field"] == "taskGroupIds"
    assert (
        api.post(f"{BASE}/nope/taskGroups/handoff", json={"taskGroupIds": [0]}).status_code == 404
    )
    assert api.get(f"{BASE}/wiki/health").json() == {"healthy": True}
    assert api.get(f"{BASE}/nope/health").status_code == 404
    status = api.get(f"{BASE}/wiki/status").json()
    assert status["id"] == "wiki"
    assert status["payload"]["state"] == "PENDING"
    assert status["payload"]["committedOffsets"] == {}
