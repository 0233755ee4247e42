"""Druid's SQL API on the real service (issue 46): pydruid, the client Superset uses, through
its DB-API and its `druid://` SQLAlchemy dialect, over a table a real supervisor published
from a real broker; the sys tables and INFORMATION_SCHEMA; Druid's error shape, formats,
timeouts and cancel; DATASOURCE READ on every table a query names."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import sqlalchemy as sa
from pydruid.db import connect
from pydruid.db.exceptions import ProgrammingError
from sqlalchemy import select

from supervisor.db.models import SegmentRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic, produce
from supervisor.testkit.service import RunningService, db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tests.conftest import make_user, words_spec

SQL = "/druid/v2/sql"
BASE = "/druid/indexer/v1/supervisor"
SLOW = (
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000000000)"
    " SELECT COUNT(*) FROM r"
)
# pydruid 0.6.9's dialect predates SQLAlchemy 2's names for two of its hooks; it works
PYDRUID_WARNINGS = [
    pytest.mark.filterwarnings("ignore:The dbapi\\(\\) classmethod:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Dialect druid:Warning"),
]


def _records(count: int) -> list[tuple[None, bytes]]:
    """Records over three days, each word distinct (n0, n1, ...), channel by remainder."""
    return [
        (
            None,
            json.dumps(
                {"ts": f"2026-11-2{i % 3}T10:00:00Z", "word": f"n{i}", "channel": f"c{i % 4}"}
            ).encode(),
        )
        for i in range(count)
    ]


def _published(service: Any) -> int:
    return sum(row[0] for row in db_rows(service, select(SegmentRow.num_rows)))


@pytest.mark.kafka
@pytest.mark.spark
@PYDRUID_WARNINGS[0]
@PYDRUID_WARNINGS[1]
def test_pydruid_reads_what_a_supervisor_published(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path, metadata_url: str
) -> None:
    topic = f"sql-{tmp_path.name[-12:].replace('_', '-')}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    produce(kafka.bootstrap_servers, topic, _records(300))
    spec = words_spec("wiki", topic, kafka.bootstrap_servers)
    spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] = False
    spec["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] = ["word", "channel"]
    with overlord_with_tasks(tmp_path, jar_cache, "local[1]", metadata_url=metadata_url) as (
        service,
        api,
    ):
        assert api.post(BASE, json=spec).status_code == 200
        wait_for(lambda: _reading(api) == 300, 240, "the task at 300 records")
        api.post(f"{BASE}/wiki/taskGroups/handoff", json={"taskGroupIds": [0]})
        wait_for(lambda: _published(service) == 300, 240, "300 rows published")
        where = urlsplit(service.url)
        host, port = where.hostname, where.port

        # pydruid's DB-API, as Superset's SQL Lab runs it
        cursor = connect(host=host, port=port, path="/druid/v2/sql/", scheme="http").cursor()
        cursor.execute(
            "SELECT channel, COUNT(*) AS n, COUNT(DISTINCT word) AS words FROM wiki"
            " GROUP BY channel ORDER BY channel"
        )
        assert [tuple(row) for row in cursor.fetchall()] == [(f"c{c}", 75, 75) for c in range(4)]
        cursor.execute(
            "SELECT TIME_FLOOR(__time, 'P1D') AS day, COUNT(*) AS n FROM wiki"
            " WHERE TIME_IN_INTERVAL(__time, '2026-11-20/P2D') GROUP BY 1 ORDER BY 1"
        )
        assert [tuple(row) for row in cursor.fetchall()] == [
            ("2026-11-20T00:00:00.000Z", 100),
            ("2026-11-21T00:00:00.000Z", 100),
        ]
        with pytest.raises(ProgrammingError, match="INVALID_INPUT"):
            cursor.execute("SELECT nope FROM wiki")

        # its SQLAlchemy dialect, as Superset lists tables and columns
        engine = sa.create_engine(f"druid://{host}:{port}/druid/v2/sql/")
        inspector = sa.inspect(engine)
        assert inspector.get_table_names(schema="druid") == ["wiki"]
        columns = {c["name"]: c for c in inspector.get_columns("wiki", schema="druid")}
        assert {"__time", "word", "channel"} <= set(columns)
        assert isinstance(columns["__time"]["type"], sa.types.TIMESTAMP)
        assert not columns["__time"]["nullable"]
        assert isinstance(columns["word"]["type"], sa.types.String)
        with engine.connect() as connection:
            grouped = connection.execute(
                sa.text("SELECT channel, SUM(1) AS n FROM wiki WHERE channel <> 'c0' GROUP BY 1")
            ).fetchall()
        engine.dispose()
        assert sorted(tuple(row) for row in grouped) == [("c1", 75), ("c2", 75), ("c3", 75)]

        # the control plane's state: its segments and supervisor, queryable
        answer = api.post(
            SQL,
            json={
                "query": "SELECT datasource, SUM(num_rows) AS n, COUNT(*) AS segments"
                " FROM sys.segments GROUP BY 1"
            },
        )
        assert answer.status_code == 200, answer.text
        [segments] = answer.json()
        assert segments["datasource"] == "wiki" and segments["n"] == 300
        assert segments["segments"] == len(db_rows(service, select(SegmentRow.id)))
        answer = api.post(
            SQL, json={"query": "SELECT supervisor_id, source, suspended FROM sys.supervisors"}
        )
        assert answer.json() == [{"supervisor_id": "wiki", "source": topic, "suspended": 0}]
        tasks = api.post(SQL, json={"query": "SELECT COUNT(*) AS n FROM sys.tasks"}).json()
        assert tasks[0]["n"] >= 1


def _reading(api: httpx.Client) -> int:
    active = api.get(f"{BASE}/wiki/status").json()["payload"]["activeTasks"]
    return sum(sum((t.get("currentOffsets") or {}).values()) for t in active)


def _running(service: RunningService) -> list[str]:
    engine = service.app.state.context.sql_engine
    return [] if engine is None else list(engine.running())


def _query(api: httpx.Client, query: str, **body: Any) -> httpx.Response:
    return api.post(SQL, json={"query": query, **body})


def test_formats_headers_parameters_and_druid_errors(api: httpx.Client) -> None:
    answer = _query(
        api,
        "SELECT ? AS word, 1 + 1, TIMESTAMP '2026-11-20 10:00:00' AS t",
        parameters=[{"type": "VARCHAR", "value": "hi"}],
        resultFormat="array",
        header=True,
        typesHeader=True,
        sqlTypesHeader=True,
        context={"sqlQueryId": "my-query", "sqlTimeZone": "Asia/Kolkata"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Druid-SQL-Query-Id"] == "my-query"
    assert answer.headers["X-Druid-SQL-Header-Included"] == "yes"
    assert answer.json() == [
        ["word", "EXPR$1", "t"],
        ["STRING", "LONG", "LONG"],
        ["VARCHAR", "INTEGER", "TIMESTAMP"],
        ["hi", 2, "2026-11-20T10:00:00.000+05:30"],
    ]
    csv = _query(api, "SELECT 'a,b' AS x, NULL AS y", resultFormat="csv")
    assert csv.headers["content-type"].startswith("text/csv")
    assert csv.text == '"a,b",\n\n'
    lines = _query(api, "SELECT 1 AS x UNION ALL SELECT 2", resultFormat="objectLines")
    assert lines.text == '{"x": 1}\n{"x": 2}\n\n'

    for body, status, says in (
        ({"query": "SELEC 1"}, 400, "could not be parsed"),
        ({"query": "SELECT * FROM nothing_here"}, 400, "Object 'nothing_here' not found"),
        ({"query": "SELECT getenv('HOME')"}, 400, "GETENV is not supported"),
        ({"query": "DROP TABLE x"}, 400, "only SELECT"),
        ({"query": "SELECT 1", "resultFormat": "xml"}, 400, "resultFormat"),
        ({"query": "SELECT 1", "typesHeader": True}, 400, "need header"),
        ({"query": "SELECT 1", "context": {"timeout": -1}}, 400, "context.timeout"),
        ({"query": "SELECT 1", "context": {"sqlQueryId": "a b"}}, 400, "sqlQueryId"),
        ({"query": "SELECT 1", "context": {"sqlTimeZone": "+05:30"}}, 400, "whole-hour"),
        ({"query": "SELECT 1", "surprise": 1}, 400, "surprise"),
        ({"q": "SELECT 1"}, 400, "q: not a field"),
        ({"query": SLOW, "context": {"timeout": 300}}, 504, "did not finish"),
    ):
        answer = api.post(SQL, json=body)
        assert answer.status_code == status, (body, answer.text)
        error = answer.json()
        assert error["error"] == "druidException" and says in error["errorMessage"], error
        assert {"errorCode", "persona", "category", "context"} <= set(error)
    assert (
        api.post(SQL, content=b"{nope", headers={"content-type": "application/json"})
        .json()["errorMessage"]
        .startswith("body: malformed JSON")
    )
    assert _query(api, "SELECT 1", context={"sqlOuterLimit": 0}).json() == []


def test_a_running_query_is_cancelled_by_its_id(api: httpx.Client) -> None:
    assert api.delete(f"{SQL}/nothing-runs").status_code == 404
    answers: list[httpx.Response] = []
    runner = threading.Thread(
        target=lambda: answers.append(_query(api, SLOW, context={"sqlQueryId": "to-stop"}))
    )
    runner.start()
    deadline = time.monotonic() + 20
    cancelled = api.delete(f"{SQL}/to-stop")
    while cancelled.status_code == 404 and time.monotonic() < deadline:
        time.sleep(0.05)
        cancelled = api.delete(f"{SQL}/to-stop")
    runner.join(30)
    assert cancelled.status_code == 202
    [answer] = answers
    assert answer.status_code == 409 and answer.json()["category"] == "CANCELED"


def test_every_table_a_query_names_needs_datasource_read(
    secured: tuple[RunningService, httpx.Client],
) -> None:
    service, admin = secured
    for name in ("open", "closed"):
        spec = words_spec(name, f"topic-{name}", "127.0.0.1:9")
        assert admin.post(BASE, json=spec).status_code == 200
    read_open = [{"resource": {"name": "open", "type": "DATASOURCE"}, "action": "READ"}]
    make_user(admin, "reader", "reader-pass-1", read_open)
    with httpx.Client(base_url=service.url, timeout=30, auth=("reader", "reader-pass-1")) as user:
        # refused before its existence is looked at: the same 403 for a table that exists
        for name in ("closed", "no_such_table"):
            answer = _query(user, f"SELECT COUNT(*) FROM {name}")
            assert answer.status_code == 403, answer.text
            assert answer.json()["category"] == "FORBIDDEN"
        joined = _query(user, "SELECT 1 FROM sys.tasks JOIN closed ON TRUE")
        assert joined.status_code == 403
        # the sys tables hold only what the user may read
        ids = _query(user, "SELECT supervisor_id FROM sys.supervisors ORDER BY 1").json()
        assert ids == [{"supervisor_id": "open"}]
        assert _query(admin, "SELECT COUNT(*) AS n FROM sys.supervisors").json() == [{"n": 2}]
        # nobody but the asker (or STATE WRITE) cancels a query
        answers: list[httpx.Response] = []
        runner = threading.Thread(
            target=lambda: answers.append(
                _query(admin, SLOW, context={"sqlQueryId": "admins", "timeout": 20_000})
            )
        )
        runner.start()
        wait_for(lambda: "admins" in _running(service), 20, "the admin's query running")
        assert user.delete(f"{SQL}/admins").status_code == 403
        assert admin.delete(f"{SQL}/admins").status_code == 202
        runner.join(30)
        assert answers[0].status_code == 409
    anonymous = httpx.post(f"{service.url}{SQL}", json={"query": "SELECT 1"})
    assert anonymous.status_code == 401


def _live_records(start: int, count: int) -> list[tuple[None, bytes]]:
    return [
        (
            None,
            json.dumps({"ts": "2026-11-20T10:00:00Z", "word": f"w{i}", "channel": "c"}).encode(),
        )
        for i in range(start, start + count)
    ]


def _count(api: httpx.Client, table: str) -> int | None:
    """COUNT(*) through the SQL API; None while the datasource is not found (nothing published
    and no rows held yet)."""
    answer = api.post(SQL, json={"query": f"SELECT COUNT(*) AS n FROM {table}"})
    if answer.status_code == 400 and "not found" in answer.text:
        return None
    assert answer.status_code == 200, answer.text
    return int(answer.json()[0]["n"])


def _exactly_once_while_rolling_over(
    kafka: LocalKafka,
    jar_cache: Path,
    tmp_path: Path,
    runtime: str,
    replicas: int,
    over_chat: bool = False,
) -> None:
    """A producer at a steady rate, task groups rolling over every 20 s: COUNT(*) polled every
    200 ms never falls and never passes the records sent, and equals them once the producer
    stops and the tasks catch up. Some answers count rows no publish had yet committed; the
    first comes before the datasource's first publish, from the rows its tasks hold. With
    `over_chat`, the held files come from the tasks as Arrow over their chat API, as they do
    for an overlord on another machine than the task host's work directory."""
    topic = f"live-{tmp_path.name[-12:].replace('_', '-')}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    spec = words_spec("live", topic, kafka.bootstrap_servers)
    spec["spec"]["dataSchema"]["granularitySpec"]["rollup"] = False
    spec["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] = ["word", "channel"]
    spec["spec"]["ioConfig"].update({"taskDuration": "PT20S", "replicas": replicas})
    sent = 0
    stop = threading.Event()

    def producer() -> None:
        nonlocal sent
        while not stop.wait(0.1):
            batch = _live_records(sent, 20)
            sent += len(batch)  # counted before it is sent: an answer may see it at once
            produce(kafka.bootstrap_servers, topic, batch)

    with overlord_with_tasks(
        tmp_path, jar_cache, "local[1]", task_runtime=runtime, sql_held_over_chat=over_chat
    ) as (service, api):
        assert api.post(BASE, json=spec).status_code == 200
        feeding = threading.Thread(target=producer, name="producer", daemon=True)
        feeding.start()
        try:
            wait_for(lambda: _count(api, "live") is not None, 240, "the first rows held")
            # before the first publish (20 s after the tasks start): the rows the tasks hold,
            # in INFORMATION_SCHEMA too (as Superset lists tables and their columns)
            tables = api.post(
                SQL,
                json={
                    "query": "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES"
                    " WHERE TABLE_SCHEMA = 'druid'"
                },
            )
            columns = api.post(
                SQL,
                json={
                    "query": "SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS"
                    " WHERE TABLE_NAME = 'live'",
                    "resultFormat": "array",
                },
            )
            assert _published(service) == 0, "the first answer came only after a publish"
            assert tables.json() == [{"TABLE_NAME": "live"}], tables.text
            found = dict(map(tuple, columns.json()))
            assert found["__time"] == "TIMESTAMP" and found["word"] == found["channel"] == "VARCHAR"
            last, ahead, began = 0, 0, time.monotonic()
            while time.monotonic() - began < 45:
                polled = time.monotonic()
                count = _count(api, "live")
                upper = sent
                assert count is not None and last <= count <= upper, (last, count, upper)
                published = _published(service)
                ahead += count > published  # rows the tasks hold, not yet published
                last = count
                time.sleep(max(0.0, 0.2 - (time.monotonic() - polled)))
        finally:
            stop.set()
            feeding.join(30)
        assert ahead > 0, "no answer held a row a publish had not committed yet"
        generations = db_rows(service, select(SegmentRow.id))
        assert generations, "nothing was published while the groups rolled over"
        started = len(api.get("/druid/indexer/v1/tasks", params={"datasource": "live"}).json())
        assert started >= 3 * replicas, f"{started} tasks: the groups did not roll over twice"

        def caught_up() -> bool:
            count = _count(api, "live")
            assert count is not None and last <= count <= sent
            return count == sent

        wait_for(caught_up, 120, f"COUNT(*) at the {sent} records sent")
        words = api.post(SQL, json={"query": "SELECT COUNT(DISTINCT word) AS n FROM live"})
        assert words.json() == [{"n": sent}]


@pytest.mark.kafka
@pytest.mark.spark
def test_count_is_exactly_once_across_rollovers_on_the_shared_runtime_over_chat(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    _exactly_once_while_rolling_over(
        kafka, jar_cache, tmp_path, "shared", replicas=2, over_chat=True
    )


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.long
def test_count_is_exactly_once_across_rollovers_on_the_process_runtime(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    _exactly_once_while_rolling_over(kafka, jar_cache, tmp_path, "process", replicas=1)
