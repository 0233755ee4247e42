"""Authentication and roles on the real service (SQLite and PostgreSQL): every route is
refused without credentials (401) and with a role that lacks its permission (403), and
allowed with it; Druid's basic-security API manages users, roles and permissions; API
tokens; the audit log names the identity."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import select

from supervisor.db.engine import make_engine, session_factory
from supervisor.db.models import AuditRow, TaskRow
from supervisor.settings import Settings
from supervisor.testkit.service import RunningService, db_rows
from tests.conftest import AUTHN, AUTHZ, SEC, make_user
from tests.specs import spec, task

SUP = "/druid/indexer/v1/supervisor"


def grant(kind: str, name: str, *actions: str) -> list[dict[str, Any]]:
    return [{"resource": {"type": kind, "name": name}, "action": a} for a in actions]


TASK = task("by-hand", {"bootstrap.servers": "127.0.0.1:9"})
RESET = {
    "type": "kafka",
    "partitions": {"type": "end", "stream": "wiki-edits", "partitionOffsetMap": {"0": 0}},
}
HEARTBEAT = {
    "host": "127.0.0.1:9",
    "scheme": "http",
    "ip": "127.0.0.1",
    "capacity": 1,
    "version": "test",
    "category": "_default_worker_category",
    "token": "t" * 32,
}
COORD = "/druid/coordinator/v1"
AUTOCOMPACT = f"{SUP}/autocompact__wiki"  # the wiki datasource's compaction supervisor
AUTOCOMPACT_READS = ["", "/status", "/history", "/health", "/stats", "/parseErrors"]
AUTOCOMPACT_WRITES = ["suspend", "resume", "terminate", "shutdown", "reset", "resetOffsets"]
AUTOCOMPACT_WRITES += ["taskGroups/handoff"]
WHEN = "2026-01-01/2026-02-01"
# Every route: (method, path, body, what an identity without the permission gets).
# "refused": 403; "filtered": 200 without the wiki datasource in it.
ROUTES: list[tuple[str, str, Any, str]] = [
    ("POST", SUP, spec("wiki"), "refused"),
    ("GET", SUP, None, "filtered"),
    ("GET", f"{SUP}?full", None, "filtered"),
    ("GET", f"{SUP}/history", None, "filtered"),
    ("POST", f"{SUP}/suspendAll", None, "filtered"),
    ("POST", f"{SUP}/resumeAll", None, "filtered"),
    ("POST", f"{SUP}/terminateAll", None, "filtered"),
    ("GET", f"{SUP}/wiki", None, "refused"),
    ("GET", f"{SUP}/wiki/history", None, "refused"),
    ("POST", f"{SUP}/wiki/suspend", None, "refused"),
    ("POST", f"{SUP}/wiki/resume", None, "refused"),
    ("POST", f"{SUP}/wiki/terminate", None, "refused"),
    ("POST", f"{SUP}/wiki/shutdown", None, "refused"),
    ("GET", f"{SUP}/wiki/status", None, "refused"),
    ("GET", f"{SUP}/wiki/stats", None, "refused"),
    ("GET", f"{SUP}/wiki/parseErrors", None, "refused"),
    ("POST", f"{SUP}/wiki/reset", None, "refused"),
    ("POST", f"{SUP}/wiki/resetOffsets", RESET, "refused"),
    ("POST", f"{SUP}/wiki/taskGroups/handoff", {"taskGroupIds": [0]}, "refused"),
    ("GET", f"{SUP}/wiki/health", None, "refused"),
    ("POST", SUP, {"type": "autocompact", "spec": {"dataSource": "wiki"}}, "refused"),
    *[("GET", f"{AUTOCOMPACT}{tail}", None, "refused") for tail in AUTOCOMPACT_READS],
    *[("POST", f"{AUTOCOMPACT}/{tail}", None, "refused") for tail in AUTOCOMPACT_WRITES],
    ("POST", "/druid/indexer/v1/task", TASK, "refused"),
    ("GET", "/druid/indexer/v1/tasks", None, "filtered"),
    ("GET", "/druid/indexer/v1/runningTasks", None, "filtered"),
    ("GET", "/druid/indexer/v1/completeTasks", None, "filtered"),
    ("GET", "/druid/indexer/v1/waitingTasks", None, "filtered"),
    ("GET", "/druid/indexer/v1/pendingTasks", None, "filtered"),
    ("POST", "/druid/indexer/v1/datasources/wiki/shutdownAllTasks", None, "refused"),
    ("GET", "/druid/indexer/v1/task/wiki-task", None, "refused"),
    ("GET", "/druid/indexer/v1/task/wiki-task/status", None, "refused"),
    ("GET", "/druid/indexer/v1/task/wiki-task/reports", None, "refused"),
    ("GET", "/druid/indexer/v1/task/wiki-task/log", None, "refused"),
    ("POST", "/druid/indexer/v1/task/wiki-task/shutdown", None, "refused"),
    ("GET", "/druid/coordinator/v1/metadata/datasources", None, "filtered"),
    ("GET", "/druid/coordinator/v1/metadata/datasources/wiki/segments", None, "refused"),
    ("GET", f"{COORD}/rules", None, "filtered"),
    ("GET", f"{COORD}/rules/wiki", None, "refused"),
    ("POST", f"{COORD}/rules/wiki", [{"type": "dropBeforeByPeriod", "period": "P7D"}], "refused"),
    ("POST", f"{COORD}/datasources/wiki/markUnused", {"interval": WHEN}, "refused"),
    ("POST", f"{COORD}/datasources/wiki/markUsed", {"interval": WHEN}, "refused"),
    ("POST", f"{COORD}/datasources/wiki/segments/wiki-task", None, "refused"),
    ("DELETE", f"{COORD}/datasources/wiki/segments/wiki-task", None, "refused"),
    ("DELETE", f"{COORD}/datasources/wiki", None, "refused"),
    ("GET", f"{COORD}/config/compaction", None, "filtered"),
    ("POST", f"{COORD}/config/compaction", {"dataSource": "wiki"}, "refused"),
    ("GET", f"{COORD}/config/compaction/wiki", None, "refused"),
    ("DELETE", f"{COORD}/config/compaction/wiki", None, "refused"),
    ("POST", f"{COORD}/config/compaction/cluster", {"maxCompactionTaskSlots": 9}, "refused"),
    ("POST", f"{COORD}/config/compaction/taskslots?max=9", None, "refused"),
    ("GET", f"{COORD}/compaction/status", None, "filtered"),
    ("GET", f"{COORD}/compaction/progress?dataSource=wiki", None, "refused"),
    ("DELETE", f"{COORD}/datasources/wiki/intervals/{WHEN.replace('/', '_')}", None, "refused"),
    ("GET", "/druid/indexer/v1/leader", None, "refused"),
    ("GET", "/druid/indexer/v1/isLeader", None, "refused"),
    ("GET", "/druid/indexer/v1/workers", None, "refused"),
    ("POST", "/druid/indexer/v1/worker/wiki/enable", None, "refused"),
    ("POST", "/druid/indexer/v1/worker/wiki/disable", None, "refused"),
    ("POST", "/druid-internal/v1/workers", HEARTBEAT, "refused"),
    ("GET", "/metrics", None, "refused"),
    ("GET", "/status", None, "refused"),
    ("GET", f"{SEC}/authentication/loadStatus", None, "refused"),
    ("GET", f"{AUTHN}/users", None, "refused"),
    ("GET", f"{AUTHN}/users/admin", None, "refused"),
    ("POST", f"{AUTHN}/users/mallory", None, "refused"),
    ("DELETE", f"{AUTHN}/users/admin", None, "refused"),
    ("POST", f"{AUTHN}/users/admin/credentials", {"password": "x"}, "refused"),
    ("GET", f"{AUTHN}/users/admin/tokens", None, "refused"),
    ("POST", f"{AUTHN}/users/admin/tokens/stolen", None, "refused"),
    ("DELETE", f"{AUTHN}/users/admin/tokens/stolen", None, "refused"),
    ("GET", f"{SEC}/authorization/loadStatus", None, "refused"),
    ("GET", f"{AUTHZ}/users", None, "refused"),
    ("GET", f"{AUTHZ}/users/admin", None, "refused"),
    ("POST", f"{AUTHZ}/users/mallory", None, "refused"),
    ("DELETE", f"{AUTHZ}/users/admin", None, "refused"),
    ("GET", f"{AUTHZ}/roles", None, "refused"),
    ("GET", f"{AUTHZ}/roles/admin", None, "refused"),
    ("POST", f"{AUTHZ}/roles/mallory", None, "refused"),
    ("DELETE", f"{AUTHZ}/roles/admin", None, "refused"),
    ("POST", f"{AUTHZ}/users/reader/roles/admin", None, "refused"),
    ("DELETE", f"{AUTHZ}/users/admin/roles/admin", None, "refused"),
    ("POST", f"{AUTHZ}/roles/reader-role/permissions", grant("CONFIG", ".*", "WRITE"), "refused"),
    ("POST", "/druid/v2/sql", {"query": "SELECT COUNT(*) FROM wiki"}, "refused"),
    ("DELETE", "/druid/v2/sql/wiki-task", None, "refused"),
]
OPEN = [("GET", "/status/health"), ("GET", "/console/"), ("POST", "/druid/indexer/v1/action")]


def _template(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def test_the_table_covers_every_route(secured: Any) -> None:
    service = secured[0]
    documented = {
        (method.upper(), _template(path))
        for path, operations in service.app.openapi()["paths"].items()
        for method in operations
    }
    covered = {
        (
            m,
            _template(
                re.sub(
                    r"(wiki|wiki-task|admin|mallory|stolen|reader-role|reader|basic"
                    r"|2026-01-01_2026-02-01)(?=/|$)",
                    "{}",
                    p.split("?")[0],
                )
            ),
        )
        for m, p, _, _ in ROUTES
    }
    covered |= {(m, p) for m, p in OPEN}
    assert documented - covered == set(), "a route without a permission test"


def _seed(service: RunningService, admin: httpx.Client) -> None:
    assert admin.post(SUP, json=spec("wiki")).status_code == 200
    compacting = {"type": "autocompact", "spec": {"dataSource": "wiki"}}
    assert admin.post(SUP, json=compacting).status_code == 200
    engine = make_engine(service.settings.metadata_url)
    now = datetime.now(UTC)
    with session_factory(engine)() as session:
        session.add(
            TaskRow(
                id="wiki-task",
                type="index_kafka",
                supervisor_id="wiki",
                datasource="wiki",
                payload=TASK,
                status="SUCCESS",
                created_at=now,
                updated_at=now,
            )
        )
        session.commit()
    engine.dispose()


def _call(client: httpx.Client, method: str, path: str, body: Any) -> httpx.Response:
    return (
        client.request(method, path, json=body)
        if body is not None
        else client.request(method, path)
    )


def test_every_route_needs_credentials_and_the_permission(secured: Any) -> None:
    service, admin = secured
    _seed(service, admin)
    make_user(admin, "reader", "reader-pass", grant("DATASOURCE", "other.*", "READ", "WRITE"))
    with (
        httpx.Client(base_url=service.url, timeout=30) as anonymous,
        httpx.Client(base_url=service.url, timeout=30, auth=("reader", "reader-pass")) as reader,
        httpx.Client(
            base_url=service.url,
            timeout=30,
            auth=("admin", "wrong"),
            # a guesser elsewhere: at the admin's own address, guessing the admin's password
            # would slow the admin's logins there too (the login limits' trusted bucket)
            transport=httpx.HTTPTransport(local_address="127.0.0.3"),
        ) as wrong,
    ):
        for method, path, body, kind in ROUTES:
            refused = _call(anonymous, method, path, body)
            assert refused.status_code == 401, (method, path, refused.text)
            assert refused.headers["www-authenticate"].startswith("Basic")
            # (past ten wrong passwords at once, the login limits answer 429 instead)
            assert _call(wrong, method, path, body).status_code in (401, 429), (method, path)
            answer = _call(reader, method, path, body)
            if kind == "refused":
                assert answer.status_code == 403, (method, path, answer.text)
            else:
                assert answer.status_code == 200, (method, path, answer.text)
                assert "wiki" not in answer.text, (method, path, answer.text)
        assert admin.get(f"{SUP}/wiki").json()["suspended"] is False  # suspendAll left it
        assert admin.get(AUTOCOMPACT).json()["suspended"] is False  # and the compaction
        for method, path in OPEN:
            assert (
                _call(anonymous, method, path, {} if method == "POST" else None).status_code != 401
            )
        # the admin's role allows everything (the routes that change things last; on another
        # user than the admin itself; a task that fails validation rather than starts)
        for method, path, body, _ in sorted(ROUTES, key=lambda r: r[0] != "GET"):
            if body is TASK:
                body = {**TASK, "ioConfig": {**TASK["ioConfig"], "consumerProperties": {}}}
            answer = _call(admin, method, path.replace("/admin", "/mallory"), body)
            assert answer.status_code not in (401, 403), (method, path, answer.text)


def test_the_first_start_prints_a_generated_admin_password_once(
    settings: Settings, capfd: Any
) -> None:
    settings.auth = "basic"
    with RunningService(settings) as service:
        shown = re.search(r"created user admin with password (\S+)", capfd.readouterr().err)
        assert shown is not None
        password = shown.group(1)
        with httpx.Client(base_url=service.url, timeout=30) as client:
            assert client.get(SUP, auth=("admin", password)).status_code == 200
            assert client.get(SUP, auth=("admin", "guess")).status_code == 401
    with RunningService(settings):
        assert "created user" not in capfd.readouterr().err  # users exist: nothing printed


def test_roles_tokens_and_the_audit_log(secured: Any) -> None:
    service, admin = secured
    make_user(admin, "alice", "alice-pass", grant("DATASOURCE", "wiki.*", "READ", "WRITE"))
    make_user(admin, "bob", "bob-pass", grant("DATASOURCE", "wiki.*", "READ"))
    with (
        httpx.Client(base_url=service.url, timeout=30, auth=("alice", "alice-pass")) as alice,
        httpx.Client(base_url=service.url, timeout=30, auth=("bob", "bob-pass")) as bob,
    ):
        sent = alice.post(SUP, json=spec("wiki"), headers={"X-Druid-Author": "not-alice"})
        assert sent.status_code == 200
        assert alice.post(SUP, json=spec("other")).status_code == 403
        assert bob.get(f"{SUP}/wiki").status_code == 200
        assert bob.post(f"{SUP}/wiki/suspend").status_code == 403
        assert admin.post(SUP, json=spec("other")).status_code == 200
        assert bob.get(SUP).json() == ["wiki"]  # the list shows what bob may read
        assert admin.get(SUP).json() == ["other", "wiki"]
        authors = [row[0] for row in db_rows(service, select(AuditRow.author))]
        assert authors == ["alice", "admin"]  # the identity, not the header

        # an API token: made once, shown once, works as Bearer, revoked
        made = admin.post(f"{AUTHN}/users/bob/tokens/ci").json()
        assert made["name"] == "ci" and made["token"].startswith("sg_")
        assert admin.get(f"{AUTHN}/users/bob/tokens").json()[0]["name"] == "ci"
        assert "sg_" not in admin.get(f"{AUTHN}/users/bob/tokens").text
        bearer = {"Authorization": f"Bearer {made['token']}"}
        assert bob.get(SUP, auth=None, headers=bearer).json() == ["wiki"]
        admin.delete(f"{AUTHN}/users/bob/tokens/ci")
        assert bob.get(SUP, auth=None, headers=bearer).status_code == 401

        # a new password takes effect at once on this overlord (its cache is dropped)
        admin.post(f"{AUTHN}/users/bob/credentials", json={"password": "bob-pass-2"})
        assert bob.get(SUP).status_code == 401
        assert bob.get(SUP, auth=("bob", "bob-pass-2")).status_code == 200
        # Druid's answers
        user = admin.get(f"{AUTHZ}/users/bob", params={"full": "", "simplifyPermissions": ""})
        assert user.json()["roles"][0]["permissions"] == grant("DATASOURCE", "wiki.*", "READ")
        assert admin.get(f"{AUTHZ}/roles/bob-role", params={"full": ""}).json()["users"] == ["bob"]
        assert "hash" not in admin.get(f"{AUTHN}/users/bob").text
        assert admin.get(f"{AUTHN}/users/bob").json()["credentials"] == {"iterations": 10000}
        bad = admin.post(
            f"{AUTHZ}/roles/bob-role/permissions", json=grant("DATASOURCE", "(", "READ")
        )
        assert bad.status_code == 400 and "regular expression" in bad.json()["error"]
        assert admin.get(f"{SEC}/authentication/db/MyOther/users").status_code == 400
        admin.delete(f"{AUTHZ}/users/bob/roles/bob-role")
        assert bob.get(f"{SUP}/wiki", auth=("bob", "bob-pass-2")).status_code == 403


def test_malformed_authorization_headers_are_401(secured: Any) -> None:
    service = secured[0]
    with httpx.Client(base_url=service.url, timeout=30) as client:
        for header in (
            "Basic",
            "Basic !!!",
            "Basic " + base64.b64encode(b"no-colon").decode(),
            "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),
            "Bearer",
            "Bearer sg_nope",
            "Digest x",
            "Basic " + "A" * 7000,
        ):
            assert client.get(SUP, headers={"Authorization": header}).status_code == 401, header
        # a head over Druid's 8 KiB is refused before anything reads it (issue 43)
        huge = client.get(SUP, headers={"Authorization": "Basic " + "A" * 10000})
        assert huge.status_code == 431
        console = client.get(SUP, headers={"X-Sluicegate-Console": "1"})
        assert console.status_code == 401 and "www-authenticate" not in console.headers


def test_what_a_second_look_found(secured: Any) -> None:
    """The findings of a review of this change, each refused now."""
    service, admin = secured
    assert admin.post(SUP, json=spec("victim")).status_code == 200
    make_user(
        admin,
        "mallory",
        "mallory-pass",
        grant("DATASOURCE", "mine", "READ", "WRITE") + grant("STATE", ".*", "READ"),
    )
    with httpx.Client(base_url=service.url, timeout=30, auth=("mallory", "mallory-pass")) as m:
        # a task of her own datasource naming another datasource's supervisor would move its
        # committed offsets
        body = {**task("t-steal", {"bootstrap.servers": "127.0.0.1:9"}), "supervisorId": "victim"}
        body["dataSchema"] = {**body["dataSchema"], "dataSource": "mine"}
        refused = m.post("/druid/indexer/v1/task", json=body)
        assert refused.status_code == 400 and refused.json()["field"] == "supervisorId"
        # /metrics shows only the datasources she may read
        assert m.get("/metrics").status_code == 200 and "victim" not in m.get("/metrics").text
        # a supervisor that moved datasources keeps the old ones' specs in its history
        moved = spec("victim")
        moved["id"] = "victim"
        moved["spec"]["dataSchema"]["dataSource"] = "mine"
        assert admin.post(SUP, json=moved).status_code == 200
        assert m.get(f"{SUP}/victim/history").status_code == 403
        # out of her reach, there or not: 403 (issue 43: a 404 told her what was not there)
        assert m.get(f"{SUP}/no-such/status").status_code == 403
        assert m.get("/druid/indexer/v1/task/no-such").status_code == 403
    # a NUL in a Basic user name reached the database (a 500 on PostgreSQL)
    nul = "Basic " + base64.b64encode(b"a\x00:x").decode()
    assert httpx.get(f"{service.url}{SUP}", headers={"Authorization": nul}).status_code == 401
    assert admin.get("/druid/indexer/v1/tasks", params={"datasource": "\x00"}).status_code == 400
    odd_type = [{"resource": {"name": "x", "type": []}, "action": "READ"}]
    assert admin.post(f"{AUTHZ}/roles/mallory-role/permissions", json=odd_type).status_code == 400
    druids = grant("VIEW", ".*", "READ") + grant("SYSTEM_TABLE", ".*", "READ")
    done = admin.post(f"{AUTHZ}/roles/mallory-role/permissions", json=druids)
    assert (done.status_code, done.content) == (200, b"")  # Druid's empty answer
    assert admin.post(f"{AUTHN}/users/a:b").status_code == 400  # Basic splits at ':'
    assert admin.post(f"{AUTHN}/users/alice%20smith").status_code == 200
