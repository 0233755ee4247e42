"""Druid SQL run in the embedded DuckDB over Parquet files (supervisor/sql/engine.py): Druid's
time semantics in a zone, its aggregations, and the bounds (time, rows, concurrency, cancel),
then written in Druid's result formats (supervisor/sql/results.py)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from supervisor.sql.dialect import statements, translate
from supervisor.sql.engine import Result, SqlEngine
from supervisor.sql.errors import SqlError
from supervisor.sql.results import render
from supervisor.sql.zones import zone

SLOW = (
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 1000000000)"
    " SELECT COUNT(*) FROM r"
)
SCHEMA = pa.schema(
    [("__time", pa.timestamp("us", tz="UTC")), ("channel", pa.string()), ("added", pa.int64())]
)


@pytest.fixture(scope="module")
def engine() -> Any:
    running = SqlEngine(threads=1, memory_mb=256, max_concurrent=2)
    yield running
    running.close()


@pytest.fixture(scope="module")
def wiki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """48 rows half an hour apart from 2016-06-27T00:00Z, channels a/b; a second file written
    before `added` existed (its rows read it as null)."""
    root = tmp_path_factory.mktemp("wiki")
    times = [datetime(2016, 6, 27, h, m, tzinfo=UTC) for h in range(24) for m in (0, 30)]
    first = pa.table(
        {
            "__time": pa.array(times, pa.timestamp("ms", tz="UTC")),
            "channel": ["a", "b"] * 24,
            "added": list(range(48)),
        }
    )
    pq.write_table(first, root / "one.parquet")
    second = pa.table(
        {"__time": pa.array(times[:4], pa.timestamp("ms", tz="UTC")), "channel": ["c"] * 4}
    )
    pq.write_table(second, root / "two.parquet")
    paths = [str(root / "one.parquet"), str(root / "two.parquet")]
    return pads.dataset(paths, schema=SCHEMA, format="parquet")


def _run(engine: SqlEngine, wiki: Any, query: str, tz: str = "UTC", **bounds: Any) -> Result:
    context, tree = statements(query)
    where = zone(str(context.get("sqlTimeZone", tz)))
    found = translate(tree, where)
    sources = {name: wiki for name in found.tables}
    with engine.admit():
        return engine.run(
            bounds.get("query_id", "q"),
            found.sql,
            sources,
            where,
            bounds.get("timeout_ms", 10_000),
            bounds.get("max_rows", 1000),
        )


def _json(result: Result, tz: str = "UTC", fmt: str = "object", **flags: bool) -> Any:
    text = "".join(
        render(
            result,
            zone(tz),
            fmt,
            flags.get("header", False),
            flags.get("types", False),
            flags.get("sql_types", False),
        )
    )
    return json.loads(text) if fmt in ("object", "array") else text


def test_counts_by_hour_and_the_column_a_file_lacks(engine: SqlEngine, wiki: Any) -> None:
    result = _run(
        engine,
        wiki,
        "SELECT TIME_FLOOR(__time, 'PT6H') AS t, COUNT(*) AS n, SUM(added) AS s"
        " FROM wikipedia GROUP BY 1 ORDER BY 1",
    )
    rows = _json(result)
    assert rows[0] == {"t": "2016-06-27T00:00:00.000Z", "n": 16, "s": sum(range(12))}
    assert [row["n"] for row in rows] == [16, 12, 12, 12]
    assert sum(row["s"] for row in rows) == sum(range(48))


def test_days_are_floored_in_the_query_zone(engine: SqlEngine, wiki: Any) -> None:
    query = (
        "SET sqlTimeZone = 'America/Los_Angeles';"
        " SELECT FLOOR(__time TO DAY) AS d, TIME_FORMAT(TIME_FLOOR(__time, 'P1D')) AS f,"
        " COUNT(*) AS n FROM wikipedia GROUP BY 1, 2 ORDER BY 1"
    )
    rows = _json(_run(engine, wiki, query), "America/Los_Angeles")
    # 00:00Z is 17:00 the day before in Los Angeles (PDT, -07:00): 14 rows before midnight
    assert rows == [
        {"d": "2016-06-26T00:00:00.000-07:00", "f": "2016-06-26T00:00:00.000-07:00", "n": 18},
        {"d": "2016-06-27T00:00:00.000-07:00", "f": "2016-06-27T00:00:00.000-07:00", "n": 34},
    ]


def test_time_functions_agree_with_druid(engine: SqlEngine, wiki: Any) -> None:
    query = (
        "SELECT TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm Z', '-08:00') AS f,"
        " TIME_PARSE('2016-06-27T01:00:00+02:00') AS p, TIME_PARSE('2016-06-27 01:00:00') AS q,"
        " TIME_PARSE('27/06/2016', 'dd/MM/yyyy') AS r, TIME_PARSE('not a time') AS s,"
        " TIME_EXTRACT(__time, 'HOUR', 'Asia/Kolkata') AS h, TIMESTAMP_TO_MILLIS(__time) AS ms,"
        " MILLIS_TO_TIMESTAMP(0) AS epoch, TIME_SHIFT(__time, 'P1M', 2) AS shifted,"
        " TIME_CEIL(__time, 'PT1H') AS ceiling"
        " FROM wikipedia WHERE __time = TIMESTAMP '2016-06-27 00:30:00' AND channel = 'b'"
    )
    [row] = _json(_run(engine, wiki, query))
    assert row == {
        "f": "2016-06-26 16:30 -0800",
        "p": "2016-06-26T23:00:00.000Z",
        "q": "2016-06-27T01:00:00.000Z",
        "r": "2016-06-27T00:00:00.000Z",
        "s": None,
        "h": 6,
        "ms": 1466987400000,
        "epoch": "1970-01-01T00:00:00.000Z",
        "shifted": "2016-08-27T00:30:00.000Z",
        "ceiling": "2016-06-27T01:00:00.000Z",
    }


def test_timestampadd_and_timestampdiff_count_whole_units_as_druid(
    engine: SqlEngine, wiki: Any
) -> None:
    query = (
        "SELECT TIMESTAMPADD(HOUR, 2, __time) AS later, TIMESTAMPADD(MONTH, -1, __time) AS before,"
        " TIMESTAMPADD(SQL_TSI_DAY, added, __time) AS days,"
        " TIMESTAMPDIFF(MINUTE, __time, TIMESTAMP '2016-06-27 03:00:00') AS minutes,"
        " TIMESTAMPDIFF(HOUR, TIMESTAMP '2016-06-27 03:00:00', __time) AS hours,"
        " TIMESTAMPDIFF(MONTH, TIMESTAMP '2016-02-27 12:00:00', __time) AS months,"
        " TIMESTAMPDIFF(YEAR, __time, TIMESTAMP '2018-06-27 00:29:59') AS years"
        " FROM wikipedia WHERE __time = TIMESTAMP '2016-06-27 00:30:00' AND channel = 'b'"
    )
    [row] = _json(_run(engine, wiki, query))
    assert row == {
        "later": "2016-06-27T02:30:00.000Z",
        "before": "2016-05-27T00:30:00.000Z",
        "days": "2016-06-28T00:30:00.000Z",  # added is 1 on this row
        "minutes": 150,
        "hours": -2,  # -2.5 hours: whole units, toward zero
        "months": 3,  # a fourth month comes round at 12:00 on the 27th
        "years": 1,  # a second year is a second short
    }
    local = _json(
        _run(
            engine,
            wiki,
            query.replace("SELECT ", "SELECT TIMESTAMPADD(MONTH, 6, __time) AS m, ", 1),
            "America/Los_Angeles",
        ),
        "America/Los_Angeles",
    )[0]
    # the literal is Los Angeles' 00:30 (PDT) there, and six months on it is 00:30 again (PST)
    assert local["m"] == "2016-12-27T00:30:00.000-08:00"
    for bad, says in (
        ("TIMESTAMPADD(FORTNIGHT, 1, __time)", "TIMESTAMPADD's unit must be one of"),
        ("TIMESTAMPADD(HOUR, 1)", "TIMESTAMPADD takes 3 arguments"),
        ("TIMESTAMPDIFF('HOUR', __time, __time)", "TIMESTAMPDIFF"),
        ("TIMESTAMPDIFF(HOUR, __time)", "TIMESTAMPDIFF"),
    ):
        with pytest.raises(SqlError) as refused:
            _run(engine, wiki, f"SELECT {bad} FROM wikipedia")
        assert refused.value.status == 400 and says in refused.value.message, bad


def test_earliest_latest_distinct_and_intervals(engine: SqlEngine, wiki: Any) -> None:
    query = (
        "SELECT channel, EARLIEST(added) AS e, LATEST(added) AS l, COUNT(*) AS n,"
        " APPROX_COUNT_DISTINCT(added) AS d FROM wikipedia"
        " WHERE TIME_IN_INTERVAL(__time, '2016-06-27T00:00:00Z/PT2H') GROUP BY channel ORDER BY 1"
    )
    rows = _json(_run(engine, wiki, query))
    assert rows == [
        {"channel": "a", "e": 0, "l": 2, "n": 2, "d": 2},
        {"channel": "b", "e": 1, "l": 3, "n": 2, "d": 2},
        {"channel": "c", "e": None, "l": None, "n": 4, "d": 0},
    ]


def test_result_formats_and_their_headers(engine: SqlEngine, wiki: Any) -> None:
    result = _run(
        engine, wiki, "SELECT channel, COUNT(*) FROM wikipedia GROUP BY 1 ORDER BY 1 LIMIT 2"
    )
    assert _json(result, fmt="array", header=True, types=True, sql_types=True) == [
        ["channel", "EXPR$1"],
        ["STRING", "LONG"],
        ["VARCHAR", "BIGINT"],
        ["a", 24],
        ["b", 24],
    ]
    assert _json(result, header=True, types=True) == [
        {"channel": {"type": "STRING"}, "EXPR$1": {"type": "LONG"}},
        {"channel": "a", "EXPR$1": 24},
        {"channel": "b", "EXPR$1": 24},
    ]
    assert _json(result, fmt="objectLines") == (
        '{"channel": "a", "EXPR$1": 24}\n{"channel": "b", "EXPR$1": 24}\n\n'
    )
    assert _json(result, fmt="arrayLines", header=True) == (
        '["channel", "EXPR$1"]\n["a", 24]\n["b", 24]\n\n'
    )
    assert _json(result, fmt="csv", header=True, sql_types=True) == (
        "channel,EXPR$1\nVARCHAR,BIGINT\na,24\nb,24\n\n"
    )


def test_a_query_past_its_timeout_is_a_504_and_a_cancelled_one_a_409(
    engine: SqlEngine, wiki: Any
) -> None:
    started = time.monotonic()
    with pytest.raises(SqlError) as caught:
        _run(engine, wiki, SLOW, timeout_ms=300)
    assert caught.value.status == 504 and caught.value.category == "TIMEOUT"
    assert time.monotonic() - started < 5

    def cancel_soon() -> None:
        for _ in range(100):
            if engine.cancel("to-cancel"):
                return
            time.sleep(0.05)

    canceller = threading.Thread(target=cancel_soon)
    canceller.start()
    with pytest.raises(SqlError) as caught:
        _run(engine, wiki, SLOW, query_id="to-cancel")
    canceller.join()
    assert caught.value.status == 409 and caught.value.category == "CANCELED"
    assert engine.running() == [] and not engine.cancel("to-cancel")


def test_too_many_rows_and_too_many_queries_are_refused(engine: SqlEngine, wiki: Any) -> None:
    with pytest.raises(SqlError) as caught:
        _run(engine, wiki, "SELECT * FROM wikipedia", max_rows=10)
    assert caught.value.status == 400 and "more than 10 rows" in caught.value.message
    assert len(_run(engine, wiki, "SELECT * FROM wikipedia LIMIT 10", max_rows=10).rows) == 10

    errors: list[SqlError] = []

    def slow(query_id: str) -> None:
        try:
            _run(engine, wiki, SLOW, query_id=query_id, timeout_ms=1500)
        except SqlError as exc:
            errors.append(exc)

    both = [threading.Thread(target=slow, args=(f"slow-{i}",)) for i in range(2)]
    for thread in both:
        thread.start()
    deadline = time.monotonic() + 5
    while len(engine.running()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(SqlError) as caught:
        _run(engine, wiki, "SELECT 1")
    assert caught.value.status == 429
    for thread in both:
        thread.join()
    assert sorted(e.status for e in errors) == [504, 504]
    assert _run(engine, wiki, "SELECT 1 AS one").rows == [(1,)]  # the slots are free again


def test_duckdb_errors_are_400s_and_files_stay_out_of_reach(engine: SqlEngine, wiki: Any) -> None:
    for query, says in (
        ("SELECT nope FROM wikipedia", 'column "nope" not found'),
        ("SELECT CAST('x' AS INTEGER) FROM wikipedia", "Could not convert"),
    ):
        with pytest.raises(SqlError) as caught:
            _run(engine, wiki, query)
        assert caught.value.status == 400 and says in caught.value.message
    # past the translation's checks, DuckDB itself opens no file
    with pytest.raises(Exception, match=r"disabled|external access"):
        engine.database.cursor().execute("SELECT * FROM read_csv('/etc/hostname')")


def test_a_user_id_is_not_run_twice(engine: SqlEngine, wiki: Any, tmp_path: Path) -> None:
    started = threading.Event()

    def slow() -> None:
        started.set()
        with pytest.raises(SqlError):
            _run(engine, wiki, SLOW, query_id="same", timeout_ms=800)

    thread = threading.Thread(target=slow)
    thread.start()
    started.wait()
    deadline = time.monotonic() + 5
    while "same" not in engine.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(SqlError) as caught:
        _run(engine, wiki, "SELECT 1", query_id="same")
    assert caught.value.status == 400 and "is in use" in caught.value.message
    thread.join()


def test_a_zone_python_knows_and_duckdb_may_not_is_an_answer_or_a_400(
    engine: SqlEngine, wiki: Any
) -> None:
    for name in ("posixrules", "localtime", "posix/UTC", "right/UTC", "Asia/Kolkata"):
        try:
            answered = _run(engine, wiki, "SELECT 1 AS one", tz=name).rows
        except SqlError as exc:
            assert exc.status == 400, (name, exc)
        else:
            assert answered == [(1,)], name
    assert engine.running() == []  # nothing left registered by a refused one


def test_a_pad_past_its_bound_is_a_400_not_a_huge_string(engine: SqlEngine, wiki: Any) -> None:
    assert _run(engine, wiki, "SELECT LPAD('a', 3, 'b') AS p, RPAD('a', 2) AS q").rows == [
        ("bba", "a ")
    ]
    with pytest.raises(SqlError) as caught:
        _run(engine, wiki, "SELECT LENGTH(LPAD('a', 300000000, 'b')) AS n")
    assert caught.value.status == 400 and "lengths up to" in caught.value.message


def test_nested_replaces_past_the_bound_are_a_400_and_within_it_answer_as_before(
    engine: SqlEngine, wiki: Any
) -> None:
    within = (
        "SELECT REPLACE(REPLACE(channel, 'a', 'xyz'), 'y', '') AS r, REPLACE(NULL, 'a', 'b') AS n,"
        " REPLACE(channel, '', 'q') AS e, COUNT(*) AS c FROM wikipedia GROUP BY 1, 2, 3 ORDER BY 1"
    )
    assert _run(engine, wiki, within).rows == [
        ("b", None, "b", 24),
        ("c", None, "c", 4),
        ("xz", None, "a", 24),
    ]
    huge = (  # a 1,000-character text, each level a thousand times longer: 1 GB, then 1 TB
        "SELECT LENGTH(REPLACE(REPLACE(REPLACE(LPAD('', 1000, 'a'), 'a', LPAD('', 1000, 'b')),"
        " 'b', LPAD('', 1000, 'c')), 'c', 'dd')) AS n"
    )
    with pytest.raises(SqlError) as caught:
        _run(engine, wiki, huge)
    assert caught.value.status == 400 and "longer than 1000000" in caught.value.message
    x_column = "SELECT REPLACE(x, 's', 'f') AS r FROM (SELECT 'ssx' AS x, 1 AS s)"
    assert _run(engine, wiki, x_column).rows == [("ffx",)]


# one call of every function the README lists, each run over the table
LISTED = """TIME_FLOOR(__time, 'PT1H') | TIME_CEIL(__time, 'P1D') | TIME_SHIFT(__time, 'PT1H', -1)
TIME_EXTRACT(__time, 'DOW') | TIME_PARSE(channel) | TIME_FORMAT(__time, 'HH:mm')
FLOOR(__time TO MONTH) | CEIL(__time TO WEEK) | TIME_IN_INTERVAL(__time, '2016/2017')
MILLIS_TO_TIMESTAMP(added) | TIMESTAMP_TO_MILLIS(__time) | CURRENT_TIMESTAMP | CURRENT_DATE
DATE_TRUNC('day', __time) | EXTRACT(HOUR FROM __time) | COUNT(DISTINCT channel) | SUM(added)
MIN(added) | MAX(added) | AVG(added) | ANY_VALUE(channel) | EARLIEST(channel) | LATEST(channel)
EARLIEST_BY(channel, __time) | LATEST_BY(channel, __time) | APPROX_COUNT_DISTINCT(channel)
APPROX_COUNT_DISTINCT_BUILTIN(channel) | APPROX_COUNT_DISTINCT_DS_HLL(channel, 12)
APPROX_COUNT_DISTINCT_DS_THETA(channel) | APPROX_QUANTILE(added, 0.5)
APPROX_QUANTILE_DS(added, 0.5, 128) | STDDEV(added) | STDDEV_SAMP(added) | STDDEV_POP(added)
VARIANCE(added) | VAR_SAMP(added) | VAR_POP(added) | ARRAY_AGG(channel)
STRING_AGG(channel, ',') | ROW_NUMBER() OVER (ORDER BY __time)
RANK() OVER (ORDER BY added) | DENSE_RANK() OVER (ORDER BY added) | NTILE(2) OVER (ORDER BY added)
LAG(added) OVER (ORDER BY __time) | LEAD(added) OVER (ORDER BY __time)
FIRST_VALUE(added) OVER (ORDER BY __time) | LAST_VALUE(added) OVER (ORDER BY __time)
PERCENT_RANK() OVER (ORDER BY added) | CUME_DIST() OVER (ORDER BY added) | LOWER(channel)
UPPER(channel) | LENGTH(channel) | CHAR_LENGTH(channel) | STRLEN(channel) | CONCAT(channel, 'x')
TEXTCAT(channel, 'x') | channel || 'x' | SUBSTRING(channel, 1, 1) | SUBSTR(channel, 1)
LEFT(channel, 1) | RIGHT(channel, 1) | TRIM(channel) | BTRIM(channel) | LTRIM(channel)
RTRIM(channel) | REPLACE(channel, 'a', 'b') | STRPOS(channel, 'a') | REVERSE(channel)
LPAD(channel, 3, '-') | RPAD(channel, 3, '-') | REGEXP_EXTRACT(channel, '[a-z]')
REGEXP_LIKE(channel, '^a') | CONTAINS_STRING(channel, 'a') | ICONTAINS_STRING(channel, 'A')
channel LIKE 'a%' | ABS(added) | ROUND(added / 3.0, 1) | FLOOR(added / 3.0) | CEIL(added / 3.0)
TRUNCATE(added / 3.0, 1) | TRUNC(added / 3.0, 1) | POWER(added, 2) | SQRT(added) | EXP(1)
LN(added + 1) | LOG10(added + 1) | MOD(added, 3) | SIGN(added) | SIN(added) | COS(added)
TAN(added) | ASIN(0.5) | ACOS(0.5) | ATAN(added) | ATAN2(added, 2) | DEGREES(added)
RADIANS(added) | GREATEST(added, 3) | LEAST(added, 3) | SAFE_DIVIDE(added, 0)
COALESCE(added, 0) | NVL(added, 0) | NULLIF(added, 0) | CAST(added AS VARCHAR)
CASE WHEN added > 3 THEN 'big' ELSE 'small' END | TIMESTAMPADD(DAY, 1, __time)
TIMESTAMPDIFF(SECOND, __time, CURRENT_TIMESTAMP)"""


AGGREGATES = """COUNT SUM MIN MAX AVG ANY_VALUE EARLIEST LATEST EARLIEST_BY LATEST_BY STDDEV
VARIANCE STDDEV_SAMP STDDEV_POP VAR_SAMP VAR_POP ARRAY_AGG STRING_AGG"""


@pytest.mark.parametrize("call", [c.strip() for c in LISTED.replace("\n", " | ").split(" | ")])
def test_every_function_the_readme_lists_runs(engine: SqlEngine, wiki: Any, call: str) -> None:
    aggregate = call.split("(")[0] in AGGREGATES.split() or call.startswith("APPROX")
    query = f"SELECT {call} AS v FROM wikipedia" + ("" if aggregate else " LIMIT 3")
    result = _run(engine, wiki, query)
    assert result.columns == ["v"] and len(result.rows) == (1 if aggregate else 3)


def test_an_answer_past_its_size_is_a_400() -> None:
    from supervisor.services.sql import _bounded

    assert _bounded(iter(["ab", "cd"]), 4) == ["ab", "cd"]
    with pytest.raises(SqlError) as caught:
        _bounded(iter(["x" * 2**20, "y"]), 2**20)
    assert caught.value.status == 400 and "longer than 1 MiB" in caught.value.message


def _persist(path: Path, millis: list[int], **columns: list[Any]) -> str:
    """A task's persist file: `__time` in milliseconds since the epoch."""
    pq.write_table(pa.table({"__time": pa.array(millis, pa.int64()), **columns}), path)
    return str(path)


def test_held_rows_alone_and_a_column_only_they_have(engine: SqlEngine, tmp_path: Path) -> None:
    """Before a first publish a datasource is its held rows (their columns, __time a
    timestamp); after it, a dimension discovered since is a column, null in published rows."""
    from pyarrow import fs

    from supervisor.services.sql_held import with_held

    hour = 1_467_000_000_000  # 2016-06-27T04:00:00Z
    first = _persist(tmp_path / "a.parquet", [hour, hour + 1], channel=["a", "b"])
    second = _persist(
        tmp_path / "b.parquet", [hour + 2], channel=["a"], page=["P"], added__time_of=[hour]
    )
    local = fs.LocalFileSystem()
    alone = with_held(None, None, [first, second], local)
    assert alone.columns == ["__time", "channel", "page"] and alone.extra == []
    query = 'SELECT MIN(__time) AS t, COUNT(*) AS n, COUNT(page) AS p FROM "wiki"'
    found = translate(statements(query)[1], zone("UTC"))
    with engine.admit():
        result = engine.run(
            "held-alone", found.sql, dict.fromkeys(found.tables, alone), zone("UTC"), 9000, 9
        )
    assert result.rows == [(datetime(2016, 6, 27, 4, 0, tzinfo=UTC), 3, 1)]

    pq.write_table(
        pa.table(
            {
                "__time": pa.array([datetime(2016, 6, 27, tzinfo=UTC)], SCHEMA.field(0).type),
                "channel": ["z"],
                "added": [5],
            }
        ),
        tmp_path / "pub.parquet",
    )
    published = pads.dataset([str(tmp_path / "pub.parquet")], schema=SCHEMA, format="parquet")
    both = with_held(published, SCHEMA, [first, second], local)
    assert both.columns == ["__time", "channel", "added"] and both.extra == ["page"]
    query = 'SELECT channel, page, added FROM "wiki" ORDER BY __time'
    found = translate(statements(query)[1], zone("UTC"))
    with engine.admit():
        result = engine.run(
            "held-both", found.sql, dict.fromkeys(found.tables, both), zone("UTC"), 9000, 9
        )
    assert result.rows == [("z", None, 5), ("a", None, None), ("b", None, None), ("a", "P", None)]


def test_held_files_kept_in_memory_and_read_again_when_rewritten(
    engine: SqlEngine, tmp_path: Path
) -> None:
    """Held files read once are kept (a poll reads only new persists), up to the bound, the
    rest scanned from disk in the same answer; a file written again under its name is read
    again, and one deleted since the task's answer is a 503 to try again."""
    import os

    from pyarrow import fs

    from supervisor.services.sql_held import HeldFiles, with_held

    hour = 1_467_000_000_000
    paths = [
        _persist(tmp_path / f"{i}.parquet", [hour + i], channel=[f"c{i}"], added=[i])
        for i in range(6)
    ]
    local = fs.LocalFileSystem()
    one = pq.read_table(paths[0]).nbytes
    kept = HeldFiles(one * 3)  # room for three of the six
    query = 'SELECT COUNT(*) AS n, SUM(added) AS s, MAX(channel) AS c FROM "wiki"'
    found = translate(statements(query)[1], zone("UTC"))

    def answer(name: str, files: list[str]) -> list[tuple[Any, ...]]:
        source = with_held(None, None, files, local, kept)
        with engine.admit():
            return engine.run(
                name, found.sql, dict.fromkeys(found.tables, source), zone("UTC"), 9000, 9
            ).rows

    assert answer("kept-1", paths) == [(6, 15, "c5")]
    read = kept.read(paths, local, True)
    assert len(read.tables) == 3 and read.on_disk == paths[3:]
    assert answer("kept-2", paths) == [(6, 15, "c5")]  # three from memory, three from disk

    stat = os.stat(paths[0])
    _persist(tmp_path / "0.parquet", [hour], channel=["z"], added=[100])
    os.utime(paths[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert answer("kept-3", paths) == [(6, 115, "z")]

    odd = _persist(tmp_path / "odd.parquet", [hour], channel=[7], added=[1])  # a long here
    assert answer("kept-odd", [paths[1], odd]) == [(2, 2, "c1")]

    os.remove(paths[5])
    with pytest.raises(SqlError) as gone:
        answer("kept-4", paths)
    assert gone.value.status == 503 and "5.parquet is gone" in str(gone.value.body())


def test_utc_floors_by_epoch_arithmetic_agree_with_the_zone_conversions() -> None:
    """In UTC a floor or ceiling of whole seconds is integer arithmetic on the epoch (the
    fast path); it gives what the zone conversions give, before 1970 and on a boundary too."""
    import duckdb

    from supervisor.sql.time_functions import MACROS

    db = duckdb.connect()
    for macro in MACROS:
        db.execute(macro)
    db.execute("SET TimeZone = 'UTC'")
    instants = (
        "1969-12-31 23:59:59.5+00",
        "1969-03-02 10:11:12.345678+00",
        "1970-01-01 00:00:00+00",
        "2016-06-27 00:30:00+00",
        "2016-06-27 01:00:00+00",
        "2026-11-29 23:59:59.999+00",
    )
    for period in ("PT1S", "PT1M", "PT15M", "PT1H", "PT6H", "P1D", "P3D", "P1W"):
        for kind in ("TIME_FLOOR", "TIME_CEIL"):
            fast = translate(statements(f"SELECT {kind}(t, '{period}') FROM x")[1], zone("UTC"))
            slow = translate(
                statements(f"SELECT {kind}(t, '{period}', NULL, 'Asia/Kolkata') FROM x")[1],
                zone("UTC"),
            )
            assert "_UTC(" in fast.sql and "_UTC(" not in slow.sql
            for instant in instants:
                values = f"(SELECT TIMESTAMPTZ '{instant}' AS t)"
                got = db.execute(fast.sql.replace('"sg_t0"', values)).fetchone()
                want = db.execute(
                    slow.sql.replace('"sg_t0"', values).replace("'Asia/Kolkata'", "'UTC'")
                ).fetchone()
                assert got == want, (kind, period, instant, got, want)
    floor_day = translate(statements("SELECT FLOOR(t TO DAY) FROM x")[1], zone("UTC"))
    assert "SG_FLOOR_UTC(t, 86400000000, 0)" in floor_day.sql
