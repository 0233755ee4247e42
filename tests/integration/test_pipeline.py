"""The row pipeline on real Spark, fed rows shaped like the Kafka source's."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tasks.rows.pipeline import RowPlan, process_batch
from tasks.spec.data_schema import DataSchema
from tasks.spec.io_config import InputFormat

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)


def kafka_frame(spark: Any, values: list[Any], headers: list[Any] | None = None) -> Any:
    rows = []
    for offset, value in enumerate(values):
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        row_headers = (headers or [None] * len(values))[offset]
        rows.append(
            (
                f"k{offset}".encode(),
                raw,
                "t",
                0,
                offset,
                datetime(2026, 11, 22, 12, 0, offset, tzinfo=UTC),
                0,
                row_headers,
            )
        )
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def run(
    spark: Any,
    tmp_path: Path,
    schema: dict[str, Any],
    values: list[Any],
    input_format: dict[str, Any] | None = None,
    window: tuple[int | None, int | None] = (None, None),
    headers: list[Any] | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    plan = RowPlan(
        DataSchema.model_validate({"dataSource": "d", **schema}),
        InputFormat.model_validate(input_format or {"type": "json"}),
        *window,
    )
    out = str(tmp_path / f"persist-{len(list(tmp_path.iterdir()))}")
    result = process_batch(plan, kafka_frame(spark, values, headers), out, 10, [])
    rows = [r.asDict() for r in spark.read.parquet(out).collect()]
    return result, sorted(rows, key=lambda r: (r["__time"], json.dumps(r, default=str)))


MS = 1795305600000  # 2026-11-22T00:00:00Z


@pytest.mark.parametrize(
    ("fmt", "value", "expected"),
    [
        ("iso", "2026-11-22T00:00:01.500Z", MS + 1500),
        ("iso", "2026-11-22T01:00:00+01:00", MS),
        ("millis", str(MS + 7), MS + 7),
        ("millis", MS + 7, MS + 7),
        ("posix", MS // 1000 + 2, MS + 2000),
        ("micro", (MS + 3) * 1000, MS + 3),
        ("nano", (MS + 4) * 1_000_000, MS + 4),
        ("auto", MS + 5, MS + 5),
        ("auto", "2026-11-22T00:00:00.006Z", MS + 6),
        ("yyyy-MM-dd HH:mm:ss", "2026-11-22 00:00:09", MS + 9000),
        ("dd/MM/yyyy'T'HH:mm", "22/11/2026T00:01", MS + 60_000),
    ],
)
def test_timestamp_formats(spark: Any, tmp_path: Path, fmt: str, value: Any, expected: int) -> None:
    schema = {
        "timestampSpec": {"column": "t", "format": fmt},
        "dimensionsSpec": {"dimensions": ["x"]},
        "granularitySpec": {"queryGranularity": "NONE", "rollup": False},
    }
    result, rows = run(spark, tmp_path, schema, [{"t": value, "x": "a"}])
    assert result.stats.processed == 1, result.samples
    assert [r["__time"] for r in rows] == [expected]


def test_missing_timestamps_use_the_missing_value(spark: Any, tmp_path: Path) -> None:
    schema = {
        "timestampSpec": {
            "column": "t",
            "format": "millis",
            "missingValue": "2026-11-22T00:00:00Z",
        },
        "dimensionsSpec": {"dimensions": ["x"]},
        "granularitySpec": {"rollup": False},
    }
    result, rows = run(
        spark, tmp_path, schema, [{"x": "a"}, {"t": None, "x": "b"}, {"t": "oops", "x": "c"}]
    )
    assert [r["__time"] for r in rows] == [MS, MS]
    assert result.stats.unparseable == 1


def test_schemaless_dimensions_and_exclusions(spark: Any, tmp_path: Path) -> None:
    schema = {
        "timestampSpec": {"column": "t", "format": "millis"},
        "dimensionsSpec": {"dimensions": [], "dimensionExclusions": ["secret"]},
        "metricsSpec": [{"type": "longSum", "name": "total", "fieldName": "n"}],
        "granularitySpec": {"rollup": False},
    }
    result, rows = run(
        spark,
        tmp_path,
        schema,
        [{"t": MS, "a": "1", "secret": "x", "n": 1}, {"t": MS, "b": 2, "n": 3}],
    )
    assert [name for name, _ in result.dimensions] == ["a", "b"]
    assert [(r["a"], r["b"], r["total"]) for r in rows] == [("1", None, 1), (None, "2", 3)]
    assert "secret" not in rows[0] and "n" not in rows[0]


def test_typed_dimensions_and_every_metric(spark: Any, tmp_path: Path) -> None:
    schema = {
        "timestampSpec": {"column": "t", "format": "millis"},
        "dimensionsSpec": {
            "dimensions": ["k", {"type": "long", "name": "l"}, {"type": "double", "name": "d"}]
        },
        "metricsSpec": [
            {"type": "count", "name": "count"},
            {"type": "longSum", "name": "lsum", "fieldName": "v"},
            {"type": "doubleSum", "name": "dsum", "fieldName": "f"},
            {"type": "floatSum", "name": "fsum", "fieldName": "f"},
            {"type": "longMin", "name": "lmin", "fieldName": "v"},
            {"type": "longMax", "name": "lmax", "fieldName": "v"},
            {"type": "doubleMin", "name": "dmin", "fieldName": "f"},
            {"type": "doubleMax", "name": "dmax", "fieldName": "f"},
            {"type": "longFirst", "name": "lfirst", "fieldName": "v"},
            {"type": "longLast", "name": "llast", "fieldName": "v"},
            {"type": "stringFirst", "name": "sfirst", "fieldName": "u"},
            {"type": "stringLast", "name": "slast", "fieldName": "u"},
        ],
        "granularitySpec": {"queryGranularity": "HOUR", "rollup": True},
    }
    values = [
        {"t": MS + 3000, "k": "a", "l": "7", "d": "1.5", "v": 5, "f": 0.5, "u": "third"},
        {"t": MS + 1000, "k": "a", "l": 7, "d": 1.5, "v": 2, "f": 1.25, "u": "first"},
        {"t": MS + 2000, "k": "a", "l": 7, "d": 1.5, "v": 9, "f": 2.0, "u": "second"},
        {"t": MS + 1000, "k": "b", "l": "x", "d": 0, "v": 1, "f": 1.0, "u": "only"},
    ]
    result, rows = run(spark, tmp_path, schema, values)
    assert result.stats.processed == 3 and result.stats.processedWithError == 1  # l = "x"
    a = next(r for r in rows if r["k"] == "a")
    assert (a["__time"], a["l"], a["d"], a["count"]) == (MS, 7, 1.5, 3)
    assert (a["lsum"], a["dsum"], a["fsum"]) == (16, 3.75, pytest.approx(3.75))
    assert (a["lmin"], a["lmax"], a["dmin"], a["dmax"]) == (2, 9, 0.5, 2.0)
    assert (a["lfirst"], a["llast"], a["sfirst"], a["slast"]) == (2, 5, "first", "third")
    b = next(r for r in rows if r["k"] == "b")
    assert (b["l"], b["count"]) == (None, 1)


def test_late_and_early_rows_are_thrown_away(spark: Any, tmp_path: Path) -> None:
    schema = {
        "timestampSpec": {"column": "t", "format": "millis"},
        "dimensionsSpec": {"dimensions": ["x"]},
        "granularitySpec": {"rollup": False},
    }
    values = [{"t": MS - 1, "x": "late"}, {"t": MS, "x": "ok"}, {"t": MS + 10, "x": "early"}]
    result, rows = run(spark, tmp_path, schema, values, window=(MS, MS + 9))
    assert [r["x"] for r in rows] == ["ok"]
    assert (result.stats.processed, result.stats.thrownAway) == (1, 2)


def test_kafka_format_adds_key_timestamp_and_headers(spark: Any, tmp_path: Path) -> None:
    schema = {
        "timestampSpec": {"column": "kafka.timestamp", "format": "millis"},
        "dimensionsSpec": {"dimensions": ["x", "kafka.key", "kafka.header.env"]},
        "granularitySpec": {"rollup": False},
    }
    fmt = {"type": "kafka", "valueFormat": {"type": "json"}}
    _, rows = run(spark, tmp_path, schema, [{"x": "a"}], fmt, headers=[[("env", b"prod")]])
    assert [(r["x"], r["kafka.key"], r["kafka.header.env"]) for r in rows] == [("a", "k0", "prod")]
    assert rows[0]["__time"] == MS + 12 * 3_600_000


def test_transforms_feed_dimensions_filters_metrics_and_time(spark: Any, tmp_path: Path) -> None:
    schema = {
        "timestampSpec": {"column": "t", "format": "millis"},
        "dimensionsSpec": {"dimensions": ["page", "size", "hour"]},
        "metricsSpec": [{"type": "longSum", "name": "net", "fieldName": "net"}],
        "transformSpec": {
            "transforms": [
                {"type": "expression", "name": "page", "expression": "upper(page)"},
                {
                    "type": "expression",
                    "name": "size",
                    "expression": "if(added > 10, 'big', 'small')",
                },
                {"type": "expression", "name": "net", "expression": "added - deleted"},
                {
                    "type": "expression",
                    "name": "hour",
                    "expression": "timestamp_extract(__time, 'HOUR')",
                },
                {"type": "expression", "name": "__time", "expression": "__time + 3600000"},
            ],
            "filter": {
                "type": "not",
                "field": {"type": "selector", "dimension": "page", "value": "SKIP"},
            },
        },
        "granularitySpec": {"rollup": False},
    }
    values = [
        {"t": MS, "page": "kafka", "added": 20, "deleted": 5},
        {"t": MS, "page": "druid", "added": 3, "deleted": 1},
        {"t": MS, "page": "skip", "added": 1, "deleted": 1},
    ]
    result, rows = run(spark, tmp_path, schema, values)
    assert result.stats.thrownAway == 1
    assert sorted((r["page"], r["size"], r["net"], r["hour"], r["__time"]) for r in rows) == [
        ("DRUID", "small", 2, "0", MS + 3_600_000),
        ("KAFKA", "big", 15, "0", MS + 3_600_000),
    ]


def test_flatten_spec_paths_jq_tree_and_discovery(spark: Any, tmp_path: Path) -> None:
    nested = {
        "ts": "2026-11-22T10:00:00Z",
        "page": "Main",
        "user": {"name": "ann", "geo": {"city": "Oslo"}},
        "tags": ["a", "b"],
        "odd key": 7,
    }
    fields = [
        {"type": "path", "name": "city", "expr": "$.user.geo.city"},
        {"type": "jq", "name": "who", "expr": ".user.name"},
        {"type": "tree", "name": "city2", "nodes": ["user", "geo", "city"]},
        {"type": "path", "name": "second", "expr": "$.tags[1]"},
        {"type": "path", "name": "odd", "expr": "$['odd key']"},
        {"type": "path", "name": "gone", "expr": "$.user.nothing"},
        {"type": "root", "name": "page"},
    ]
    dims = ["page", "city", "who", "city2", "second", "odd", "gone"]
    schema = {"timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": dims}}
    for discover in (True, False):  # (without discovery, the timestamp is a field too)
        flatten = {
            "useFieldDiscovery": discover,
            "fields": [*fields, {"type": "root", "name": "ts"}],
        }
        result, rows = run(
            spark, tmp_path, schema, [nested, b"not json"], {"type": "json", "flattenSpec": flatten}
        )
        assert result.stats.as_dict()["unparseable"] == 1
        ((row),) = rows
        assert {d: row[d] for d in dims} == {
            "page": "Main",
            "city": "Oslo",
            "who": "ann",
            "city2": "Oslo",
            "second": "b",
            "odd": "7",
            "gone": None,
        }
    # the timestamp is found through discovery only: without it, no row has a time
    no_discovery = {"useFieldDiscovery": False, "fields": fields[:1]}
    result, rows = run(
        spark, tmp_path, schema, [nested], {"type": "json", "flattenSpec": no_discovery}
    )
    assert rows == [] and result.stats.as_dict()["unparseable"] == 1
    # schemaless dimensions: the discovered root fields and the flattened ones
    schemaless = {"timestampSpec": {"column": "ts"}, "dimensionsSpec": {"dimensions": []}}
    flatten = {"fields": fields[:2]}
    _, rows = run(spark, tmp_path, schemaless, [nested], {"type": "json", "flattenSpec": flatten})
    assert rows[0]["city"] == "Oslo" and rows[0]["who"] == "ann" and rows[0]["page"] == "Main"


def test_include_all_dimensions_and_schema_discovery(spark: Any, tmp_path: Path) -> None:
    rows = [
        {"t": "2026-11-22T10:00:00Z", "page": "a", "n": 3, "x": 1.5, "tag": "p", "geo": {"c": 1}},
        {"t": "2026-11-22T10:00:01Z", "page": "b", "n": 4, "x": 2, "tag": "7"},
    ]
    declared = {"dimensions": ["page"]}
    base = {"timestampSpec": {"column": "t"}, "granularitySpec": {"rollup": False}}
    # includeAllDimensions: the declared first, then what is found, as strings
    schema = {**base, "dimensionsSpec": {**declared, "includeAllDimensions": True}}
    result, got = run(spark, tmp_path, schema, rows)
    assert result.dimensions == [
        ("page", "string"),
        ("geo", "string"),
        ("n", "string"),
        ("tag", "string"),
        ("x", "string"),
    ]
    assert got[0]["geo"] == '{"c":1}' and got[1]["n"] == "4"
    # useSchemaDiscovery: whole numbers are longs, numbers doubles, the rest text
    schema = {**base, "dimensionsSpec": {**declared, "useSchemaDiscovery": True}}
    result, got = run(spark, tmp_path, schema, rows)
    assert dict(result.dimensions) == {
        "page": "string",
        "geo": "string",
        "n": "long",
        "tag": "string",
        "x": "double",
    }
    assert [(r["n"], r["x"]) for r in got] == [(3, 1.5), (4, 2.0)]


def test_a_batch_of_which_no_row_is_ingested_is_counted(spark: Any, tmp_path: Path) -> None:
    """All filtered out or unparseable: the batch's counts still come (adaptive execution
    dropped the counted stage of such a batch, and the task waited for them forever)."""
    for kept in ({"type": "false"}, {"type": "selector", "dimension": "x", "value": "none"}):
        schema = {
            "timestampSpec": {"column": "t", "format": "millis"},
            "dimensionsSpec": {"dimensions": ["x"]},
            "transformSpec": {"filter": kept},
        }
        result, rows = run(spark, tmp_path, schema, [{"t": MS, "x": "a"}, b"not json"])
        assert rows == []
        assert (result.stats.processed, result.stats.thrownAway, result.stats.unparseable) == (
            0,
            1,
            1,
        )
