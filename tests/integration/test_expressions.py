"""Druid expressions evaluated by Spark over a row of string fields."""

from __future__ import annotations

from typing import Any

import pytest

from tasks.rows.expressions import compile_expression, render

ROW = {
    "page": "Apache Kafka",
    "added": "12",
    "deleted": "5",
    "ratio": "0.25",
    "empty": None,
    "user": "  ada  ",
    "kafka.key": "k1",
}
TS = 1795305600000 + 90 * 60 * 1000  # 2026-11-22T01:30:00Z


def evaluate(spark: Any, text: str) -> Any:
    from pyspark.sql import functions as F

    frame = spark.createDataFrame([(ROW, TS)], "f map<string,string>, ts long")

    def field(name: str) -> Any:
        return F.col("ts") if name == "__time" else F.col("f").getItem(name)

    column = compile_expression(text, field)
    data_type = frame.select(column).schema.fields[0].dataType
    return frame.select(render(column, data_type).alias("v")).first()["v"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("added + deleted", "17"),
        ("added - deleted * 2", "2"),
        ("added / 8", "1.5"),
        ("7 / 2", "3"),
        ("added % 5", "2"),
        ("2 ^ 10", "1024"),
        ("-added", "-12"),
        ("ratio * 4", "1"),
        ("added > 10", "1"),
        ("added > 10 && deleted > 10", "0"),
        ("!(added < 10) || empty == 'x'", "1"),
        ("page == 'Apache Kafka'", "1"),
        ("concat(page, '/', \"kafka.key\")", "Apache Kafka/k1"),
        ("upper(page)", "APACHE KAFKA"),
        ("lower(page)", "apache kafka"),
        ("strlen(page)", "12"),
        ("substring(page, 7, 5)", "Kafka"),
        ("substring(page, 7, -1)", "Kafka"),
        ("replace(page, 'Kafka', 'Druid')", "Apache Druid"),
        ("trim(user)", "ada"),
        ("lpad('7', 3, '0')", "007"),
        ("strpos(page, 'Kafka')", "7"),
        ("contains_string(page, 'Kaf')", "1"),
        ("regexp_extract(page, '(\\\\w+) (\\\\w+)', 2)", "Kafka"),
        ("regexp_like(page, '^Apache')", "1"),
        ("like(page, 'Apa%')", "1"),
        ("if(added > 10, 'big', 'small')", "big"),
        ("nvl(empty, 'none')", "none"),
        ("isnull(empty)", "1"),
        ("notnull(page)", "1"),
        ("case_searched(added > 100, 'huge', added > 10, 'big', 'small')", "big"),
        ("case_simple(deleted, '4', 'four', '5', 'five', 'other')", "five"),
        ("abs(-3.5)", "3.5"),
        ("ceil(ratio)", "1"),
        ("floor(added / 5)", "2"),
        ("round(ratio, 1)", "0.3"),
        ("greatest(added, deleted, 3)", "12"),
        ("div(added, 5)", "2"),
        ("cast(ratio, 'DOUBLE') * 2", "0.5"),
        ("cast(added, 'LONG')", "12"),
        ("timestamp_floor(__time, 'PT1H')", str(1795305600000 + 3_600_000)),
        ("timestamp_extract(__time, 'HOUR')", "1"),
        ("timestamp_extract(__time, 'MINUTE')", "30"),
        ("timestamp_format(__time, 'yyyy-MM-dd HH:mm')", "2026-11-22 01:30"),
        ("timestamp('2026-11-22T00:00:00Z')", "1795305600000"),
        ("added + empty", None),
    ],
)
def test_expressions(spark: Any, text: str, expected: str | None) -> None:
    assert evaluate(spark, text) == expected
