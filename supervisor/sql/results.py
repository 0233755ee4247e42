"""Druid's SQL result formats: `object` and `array` (a JSON array), `objectLines` and
`arrayLines` (a JSON value a line, then a blank line), `csv` (a line a row, then a blank
line), with the header rows Druid writes for `header`, `typesHeader` and `sqlTypesHeader`.

Values are written as Druid writes them: a TIMESTAMP as an ISO 8601 string with milliseconds
in the query's zone (`Z` for UTC), a DATE as its midnight there, numbers as JSON numbers."""

from __future__ import annotations

import base64
import csv
import io
import json
import math
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from supervisor.sql.engine import Result
from supervisor.sql.errors import invalid
from supervisor.sql.zones import Zone

FORMATS = {
    "object": "application/json",
    "array": "application/json",
    "objectLines": "text/plain",
    "arrayLines": "text/plain",
    "csv": "text/csv",
}


def sql_type(duckdb_type: str) -> str:
    """Druid's SQL type of a DuckDB column type."""
    name = duckdb_type.upper()
    if name.startswith("TIMESTAMP"):
        return "TIMESTAMP"
    if name.startswith("DECIMAL") or name == "DOUBLE":
        return "DOUBLE"
    if name in ("HUGEINT", "UHUGEINT", "UBIGINT"):  # DuckDB's SUM of BIGINTs is a HUGEINT
        return "BIGINT"
    if name.endswith("]") or name.startswith("LIST"):
        return "ARRAY"
    if name.startswith(("STRUCT", "MAP", "UNION")):
        return "OTHER"
    return {
        "VARCHAR": "VARCHAR",
        "BIGINT": "BIGINT",
        "INTEGER": "INTEGER",
        "SMALLINT": "SMALLINT",
        "TINYINT": "TINYINT",
        "UINTEGER": "BIGINT",
        "USMALLINT": "INTEGER",
        "UTINYINT": "SMALLINT",
        "FLOAT": "FLOAT",
        "BOOLEAN": "BOOLEAN",
        "DATE": "DATE",
        "NULL": "VARCHAR",
        '"NULL"': "VARCHAR",
    }.get(name, "OTHER")


def native_type(duckdb_type: str) -> str:
    """Druid's native (column) type of a DuckDB column type."""
    kind = sql_type(duckdb_type)
    if kind in ("TIMESTAMP", "DATE", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "BOOLEAN"):
        return "LONG"
    if kind in ("DOUBLE", "FLOAT"):
        return kind
    if kind == "VARCHAR":
        return "STRING"
    return "COMPLEX<json>" if kind == "OTHER" else "ARRAY<STRING>"


def value(raw: Any, zone: Zone) -> Any:
    """A DuckDB value as Druid writes it in JSON."""
    if raw is None or isinstance(raw, (bool, int, str)):
        return raw
    if isinstance(raw, float):
        return raw if math.isfinite(raw) else None
    if isinstance(raw, datetime):
        moment = raw.astimezone(zone.info) if raw.tzinfo else raw.replace(tzinfo=zone.info)
        return iso(moment)
    if isinstance(raw, date):
        return iso(datetime.combine(raw, time(), tzinfo=zone.info))
    if isinstance(raw, Decimal):
        return float(raw)
    if isinstance(raw, timedelta):
        return int(raw.total_seconds() * 1000)
    if isinstance(raw, (list, tuple)):
        return [value(item, zone) for item in raw]
    if isinstance(raw, dict):
        return {str(key): value(item, zone) for key, item in raw.items()}
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(raw)).decode()
    return str(raw)


def iso(moment: datetime) -> str:
    text = moment.isoformat(timespec="milliseconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def check_format(name: Any) -> str:
    if not isinstance(name, str) or name not in FORMATS:
        raise invalid(
            f"resultFormat: '{name}' is not one of {', '.join(FORMATS)}", field="resultFormat"
        )
    return str(name)


def render(
    result: Result,
    zone: Zone,
    result_format: str,
    header: bool,
    types_header: bool,
    sql_types_header: bool,
) -> Iterator[str]:
    """The result in `result_format`, in pieces to send as they are made."""
    columns = result.columns
    natives = [native_type(kind) for kind in result.types]
    sqls = [sql_type(kind) for kind in result.types]
    rows = ([value(item, zone) for item in row] for row in result.rows)
    if result_format in ("object", "objectLines"):
        first = None
        if header:
            first = {
                name: _types(types_header, sql_types_header, natives[i], sqls[i])
                for i, name in enumerate(columns)
            }
        objects = (dict(zip(columns, row, strict=True)) for row in rows)
        yield from _json(result_format == "objectLines", first, objects)
    else:
        heads: list[list[str]] = []
        if header:  # the names, then the native types, then the SQL types, as asked
            heads = [columns] + [natives] * types_header + [sqls] * sql_types_header
        if result_format == "csv":
            yield from _csv(heads, rows)
        else:
            yield from _json(result_format == "arrayLines", heads, rows)


def _types(types_header: bool, sql_types_header: bool, native: str, sql: str) -> Any:
    if not types_header and not sql_types_header:
        return None
    found: dict[str, str] = {}
    if types_header:
        found["type"] = native
    if sql_types_header:
        found["sqlType"] = sql
    return found


def _json(lines: bool, first: Any, rows: Iterator[Any]) -> Iterator[str]:
    heads = first if isinstance(first, list) else ([] if first is None else [first])
    items = [*heads]
    if lines:
        for item in items:
            yield json.dumps(item, allow_nan=False) + "\n"
        for row in rows:
            yield json.dumps(row, allow_nan=False) + "\n"
        yield "\n"
        return
    yield "["
    separator = ""
    for item in items:
        yield separator + json.dumps(item, allow_nan=False)
        separator = ","
    for row in rows:
        yield separator + json.dumps(row, allow_nan=False)
        separator = ","
    yield "]"


def _csv(heads: list[list[str]], rows: Iterator[list[Any]]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(heads)
    for row in rows:
        writer.writerow(["" if item is None else _csv_value(item) for item in row])
        if buffer.tell() > 65_536:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    buffer.write("\n")
    yield buffer.getvalue()


def _csv_value(item: Any) -> str:
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, (list, dict)):
        return json.dumps(item)
    return str(item)
