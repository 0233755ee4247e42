"""Druid SQL carried over to DuckDB's (supervisor/sql/dialect.py, functions.py): the tables a
query names, its parameters and SET statements, and what is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from supervisor.sql.dialect import DRUID, INFORMATION_SCHEMA, SYS, TableRef, statements, translate
from supervisor.sql.errors import SqlError
from supervisor.sql.functions import supported_names
from supervisor.sql.zones import iso_interval, joda, period, zone

UTC_ZONE = zone("UTC")


def _sql(
    query: str, parameters: list[dict[str, object]] | None = None
) -> tuple[str, list[TableRef]]:
    _, tree = statements(query)
    found = translate(tree, UTC_ZONE, parameters)
    return found.sql, list(found.tables.values())


def _refused(query: str, parameters: list[dict[str, object]] | None = None) -> SqlError:
    with pytest.raises(SqlError) as caught:
        _sql(query, parameters)
    assert caught.value.status == 400
    return caught.value


def test_tables_resolve_to_their_schemas_and_keep_their_names_as_aliases() -> None:
    sql, tables = _sql(
        "SELECT w.channel, s.segment_id FROM druid.wikipedia w"
        " JOIN sys.segments s ON s.datasource = 'wikipedia'"
        " WHERE EXISTS (SELECT 1 FROM INFORMATION_SCHEMA.TABLES) AND w.added > 0"
    )
    assert tables == [
        TableRef(DRUID, "wikipedia"),
        TableRef(SYS, "segments"),
        TableRef(INFORMATION_SCHEMA, "TABLES"),
    ]
    assert '"sg_t0" AS "w"' in sql and '"sg_t1" AS "s"' in sql and '"sg_t2"' in sql
    assert "wikipedia" not in sql.split("FROM")[1].split("AS")[0]


def test_a_table_named_twice_is_registered_once_and_ctes_are_not_tables() -> None:
    sql, tables = _sql(
        "WITH recent AS (SELECT * FROM wikipedia) SELECT * FROM recent JOIN wikipedia b ON TRUE"
    )
    assert tables == [TableRef(DRUID, "wikipedia")]
    assert sql.count('"sg_t0"') == 2


def test_unnamed_columns_are_named_as_druid_names_them() -> None:
    sql, _ = _sql("SELECT COUNT(*), channel, SUM(added) AS total, 1 + 1 FROM wikipedia GROUP BY 2")
    assert 'COUNT(*) AS "EXPR$0"' in sql
    assert '1 + 1 AS "EXPR$3"' in sql and "AS total" in sql


def test_set_statements_are_context_and_parameters_are_typed_literals() -> None:
    context, _ = statements(
        "SET sqlTimeZone = 'America/Los_Angeles'; SET useCache = TRUE; SELECT 1"
    )
    assert context == {"sqlTimeZone": "America/Los_Angeles", "useCache": True}
    sql, _ = _sql(
        "SELECT * FROM wikipedia WHERE channel = ? AND added > ? AND __time >= ?",
        [
            {"type": "VARCHAR", "value": "#en"},
            {"type": "BIGINT", "value": 5},
            {"type": "TIMESTAMP", "value": "2016-06-27 00:00:00"},
        ],
    )
    assert "channel = CAST('#en' AS TEXT)" in sql
    assert "added > CAST(5 AS BIGINT)" in sql
    assert "CAST('2016-06-27 00:00:00' AS TIMESTAMP)" in sql


@pytest.mark.parametrize(
    ("query", "parameters", "says"),
    [
        ("SELECT ?", [], "has 1 parameters"),
        ("SELECT ?", [{"type": "BIGINT", "value": "x"}], "parameters[0]"),
        ("SELECT ?", [{"type": "ARRAY", "value": [1]}], "type ARRAY"),
        ("SELECT ?", [{"value": 1}], "parameters[0]"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(
    query: str, parameters: list[dict[str, object]], says: str
) -> None:
    assert says in _refused(query, parameters).message


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("SELEC 1", "could not be parsed"),
        ("DELETE FROM wikipedia", "only SELECT"),
        ("INSERT INTO wikipedia SELECT 1", "only SELECT"),
        ("SELECT 1; SELECT 2", "only SET statements"),
        ("SELECT read_csv('/etc/passwd')", "READ_CSV is not supported"),
        ("SELECT getenv('HOME')", "GETENV is not supported"),
        ("SELECT * FROM read_parquet('/etc/x')", "READ_PARQUET is not supported"),
        ("SELECT * FROM TABLE(x)", "not supported"),
        ("SELECT * FROM other.t", "no schema 'other'"),
        ("SELECT LOOKUP(a, 'x') FROM t", "LOOKUP is not supported"),
        ("SELECT TIME_FLOOR(__time, 'PT1X') FROM t", "not an ISO 8601 period"),
        ("SELECT TIME_FLOOR(__time, 'P1M1D') FROM t", "months and years"),
        ("SELECT TIME_FLOOR(__time) FROM t", "takes 2 to 4 arguments"),
        ("SELECT TIME_FORMAT(__time, 'yyyy qq') FROM t", "pattern letter 'qq'"),
        ("SELECT TIME_FLOOR(__time, 'PT1H', NULL, 'Mars/Olympus') FROM t", "unknown time zone"),
        ("SELECT FLOOR(__time TO FORTNIGHT) FROM t", "FLOOR/CEIL TO FORTNIGHT"),
        ("SELECT TIME_IN_INTERVAL(__time, 'yesterday') FROM t", "ISO 8601 interval"),
        ("", "an SQL string is required"),
    ],
)
def test_what_is_not_a_druid_query_here_is_a_400_saying_why(query: str, says: str) -> None:
    assert says in _refused(query).message


def test_druid_time_functions_become_duckdb_calls_in_the_query_zone() -> None:
    _, tree = statements(
        "SELECT TIME_FLOOR(__time, 'P1W'), FLOOR(__time TO HOUR),"
        " TIME_FORMAT(__time, 'yyyy-MM-dd'), EARLIEST(channel), APPROX_COUNT_DISTINCT(user) FROM t"
        " WHERE TIME_IN_INTERVAL(__time, '2016-06-27/P1D')"
    )
    sql = translate(tree, zone("Asia/Kolkata")).sql
    assert "SG_FLOOR(__time, CAST('1 weeks' AS INTERVAL), CAST('1970-01-05' AS TIMESTAMP)" in sql
    assert "CAST('1 hour' AS INTERVAL)" in sql and "'Asia/Kolkata'" in sql
    assert "STRFTIME(TIMEZONE('Asia/Kolkata', __time), '%Y-%m-%d')" in sql
    assert "ARG_MIN(channel, __time)" in sql
    assert 'APPROX_COUNT_DISTINCT("user")' in sql
    # the interval's times, without an offset, are in the query's zone
    assert "2016-06-27T00:00:00+05:30" in sql and "2016-06-28T00:00:00+05:30" in sql


def test_nested_druid_functions_are_all_rewritten() -> None:
    sql, _ = _sql("SELECT TIME_FORMAT(TIME_FLOOR(TIME_PARSE(ts), 'P1D')) FROM t")
    assert "TIME_FLOOR" not in sql and "TIME_PARSE" not in sql and "SG_FLOOR" in sql


def test_zones_names_and_whole_hour_offsets() -> None:
    assert zone("UTC").name == zone("Z").name == "UTC"
    assert zone("-08:00") == zone("-08:00")
    assert zone("-08:00").name == "Etc/GMT+8"
    assert zone("+05").name == "Etc/GMT-5"
    assert zone("-08:00").info.utcoffset(None) == timedelta(hours=-8)
    assert zone("America/Los_Angeles").name == "America/Los_Angeles"
    for bad in ("+05:30", "Nowhere/Else", "x; DROP TABLE t", ""):
        with pytest.raises(SqlError):
            zone(bad)


def test_periods_patterns_and_intervals() -> None:
    assert period("PT15M") == ("15 minutes", False)
    assert period("P1W") == ("1 weeks", True)
    assert period("P3M") == ("3 months", False)
    iso = ["%Y", "-", "%m", "-", "%d", "T", "%H", ":", "%M", ":", "%S", ".", "%g", True]
    assert joda("yyyy-MM-dd'T'HH:mm:ss.SSSZZ") == iso
    assert joda("'it''s' HH") == ["it's", " ", "%H"]
    assert joda("HH''mm") == ["%H", "'", "%M"]
    start, end = iso_interval("2016-06-27T00:00:00Z/PT1H", UTC_ZONE)
    assert (start, end) == (
        datetime(2016, 6, 27, tzinfo=UTC),
        datetime(2016, 6, 27, 1, tzinfo=UTC),
    )
    start, end = iso_interval("P1M/2016-03-31T00:00:00+01:00", UTC_ZONE)
    with pytest.raises(SqlError):
        iso_interval("P1M/P1D", UTC_ZONE)
    assert end - start == timedelta(days=31) and start.tzinfo == timezone(timedelta(hours=1))


def test_every_supported_name_is_listed_once() -> None:
    names = supported_names()
    assert len(names) == len(set(names))
    assert {"TIME_FLOOR", "EARLIEST", "APPROX_DISTINCT", "COUNT"} <= set(names)


def test_a_comment_cannot_pass_a_call_off_as_the_translations_own() -> None:
    # sqlglot turns `/* sqlglot.meta KEY */` into a node's meta, the mark of written calls
    for query in (
        "SELECT current_setting('memory_limit') /* sqlglot.meta sluicegate */",
        "SELECT version() /* sqlglot.meta sluicegate */",
    ):
        assert "is not supported" in _refused(query).message
    lateral = "SELECT * FROM (SELECT 1) t, LATERAL query('SELECT 42') /* sqlglot.meta sluicegate */"
    assert "not supported" in _refused(lateral).message
    sql, _ = _sql("SELECT 1 /* a comment */ AS one")
    assert "comment" not in sql


def test_a_cte_name_means_the_cte_only_within_its_query() -> None:
    # outside the subquery that defines it, pg_settings is a datasource (checked, then 404)
    sql, tables = _sql("SELECT * FROM (WITH pg_settings AS (SELECT 1) SELECT 1) a, pg_settings")
    assert tables == [TableRef(DRUID, "pg_settings")]
    assert '"sg_t0" AS "pg_settings"' in sql
    # a CTE reading the datasource of its own name reads the datasource (it is not recursive)
    sql, tables = _sql("WITH wikipedia AS (SELECT * FROM wikipedia) SELECT * FROM wikipedia")
    assert tables == [TableRef(DRUID, "wikipedia")]
    assert sql.count("sg_t0") == 1
    # a later CTE sees an earlier one; an earlier one does not see a later
    _, tables = _sql("WITH a AS (SELECT * FROM b), b AS (SELECT * FROM a) SELECT * FROM b")
    assert tables == [TableRef(DRUID, "b")]


def test_deep_queries_are_400s_and_a_long_filter_translates() -> None:
    deep = "SELECT " + "(" * 400 + "1" + ")" * 400
    assert "nested too deeply" in _refused(deep).message
    subqueries = "SELECT * FROM " + "(SELECT * FROM " * 150 + "wikipedia" + ") s" * 150
    assert _refused(subqueries).status == 400
    filtered = " OR ".join(f"added = {n}" for n in range(1000))
    sql, tables = _sql(f"SELECT COUNT(*) FROM wikipedia WHERE {filtered}")
    assert tables == [TableRef(DRUID, "wikipedia")] and "added = 999" in sql


def test_zones_and_intervals_out_of_range_are_400s() -> None:
    for offset in ("-13:00", "-14:00", "+15:00"):
        with pytest.raises(SqlError) as caught:
            zone(offset)
        assert caught.value.status == 400 and "-12:00 to +14:00" in caught.value.message
    assert zone("-12:00").name == "Etc/GMT+12" and zone("+14:00").name == "Etc/GMT-14"
    for interval in (
        "2000-01-01/P99999999Y",
        "P9000Y/2000-01-01",
        "2000-01-01/P999999999999D",
        "9999-12-31/P1D",
    ):
        with pytest.raises(SqlError) as caught:
            iso_interval(interval, UTC_ZONE)
        assert caught.value.status == 400, interval


def test_a_double_parameter_out_of_range_is_a_400() -> None:
    refused = _refused("SELECT ?", [{"type": "DOUBLE", "value": 10**400}])
    assert "out of range" in refused.message


def test_clauses_a_table_would_lose_are_refused() -> None:
    assert "SAMPLE" in _refused("SELECT * FROM wikipedia TABLESAMPLE (10 PERCENT)").message
