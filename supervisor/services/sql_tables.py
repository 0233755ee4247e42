"""The shapes of the SQL API's system tables (Druid's `sys` and INFORMATION_SCHEMA columns)
and the rows INFORMATION_SCHEMA gives a table and a column, with Druid's SQL and JDBC types."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg import types as ice
from pyiceberg.io.pyarrow import schema_to_pyarrow

from supervisor.sql.dialect import DRUID

# java.sql.Types of Druid's SQL types (INFORMATION_SCHEMA.COLUMNS.JDBC_TYPE)
JDBC = {"TIMESTAMP": 93, "VARCHAR": 12, "BIGINT": -5, "INTEGER": 4, "DOUBLE": 8, "FLOAT": 6}
JDBC |= {"BOOLEAN": 16, "DATE": 91, "OTHER": 1111, "ARRAY": 2003}

_S, _L = pa.string(), pa.int64()
SYS_SCHEMAS = {
    "segments": pa.schema(
        [
            ("segment_id", _S),
            ("datasource", _S),
            ("start", _S),
            ("end", _S),
            ("size", _L),
            ("version", _S),
            ("partition_num", _L),
            ("num_replicas", _L),
            ("num_rows", _L),
            ("is_active", _L),
            ("is_published", _L),
            ("is_available", _L),
            ("is_realtime", _L),
            ("is_overshadowed", _L),
            ("shard_spec", _S),
            ("dimensions", _S),
            ("metrics", _S),
            ("last_compaction_state", _S),
            ("replication_factor", _L),
        ]
    ),
    "tasks": pa.schema(
        [
            ("task_id", _S),
            ("group_id", _S),
            ("type", _S),
            ("datasource", _S),
            ("created_time", _S),
            ("queue_insertion_time", _S),
            ("status", _S),
            ("runner_status", _S),
            ("duration", _L),
            ("location", _S),
            ("host", _S),
            ("plaintext_port", _L),
            ("tls_port", _L),
            ("error_msg", _S),
        ]
    ),
    "supervisors": pa.schema(
        [
            ("supervisor_id", _S),
            ("state", _S),
            ("detailed_state", _S),
            ("healthy", _L),
            ("type", _S),
            ("source", _S),
            ("suspended", _L),
            ("spec", _S),
        ]
    ),
    "servers": pa.schema(
        [
            ("server", _S),
            ("host", _S),
            ("plaintext_port", _L),
            ("tls_port", _L),
            ("server_type", _S),
            ("tier", _S),
            ("curr_size", _L),
            ("max_size", _L),
            ("is_leader", _L),
            ("start_time", _S),
        ]
    ),
    "server_segments": pa.schema([("server", _S), ("segment_id", _S)]),
}
INFO_SCHEMAS = {
    "SCHEMATA": pa.schema(
        [
            ("CATALOG_NAME", _S),
            ("SCHEMA_NAME", _S),
            ("SCHEMA_OWNER", _S),
            ("DEFAULT_CHARACTER_SET_CATALOG", _S),
            ("DEFAULT_CHARACTER_SET_SCHEMA", _S),
            ("DEFAULT_CHARACTER_SET_NAME", _S),
            ("SQL_PATH", _S),
        ]
    ),
    "TABLES": pa.schema(
        [
            ("TABLE_CATALOG", _S),
            ("TABLE_SCHEMA", _S),
            ("TABLE_NAME", _S),
            ("TABLE_TYPE", _S),
            ("IS_JOINABLE", _S),
            ("IS_BROADCAST", _S),
        ]
    ),
    "COLUMNS": pa.schema(
        [
            ("TABLE_CATALOG", _S),
            ("TABLE_SCHEMA", _S),
            ("TABLE_NAME", _S),
            ("COLUMN_NAME", _S),
            ("ORDINAL_POSITION", _L),
            ("COLUMN_DEFAULT", _S),
            ("IS_NULLABLE", _S),
            ("DATA_TYPE", _S),
            ("CHARACTER_MAXIMUM_LENGTH", _L),
            ("CHARACTER_OCTET_LENGTH", _L),
            ("NUMERIC_PRECISION", _L),
            ("NUMERIC_PRECISION_RADIX", _L),
            ("NUMERIC_SCALE", _L),
            ("DATETIME_PRECISION", _L),
            ("CHARACTER_SET_NAME", _S),
            ("COLLATION_NAME", _S),
            ("JDBC_TYPE", _L),
        ]
    ),
}


def sql_type_of(kind: ice.IcebergType) -> str:
    """Druid's SQL type of an Iceberg column type (as the Arrow type it reads as)."""
    return sql_type_of_arrow(schema_to_pyarrow(kind))


def sql_type_of_arrow(kind: pa.DataType) -> str:
    """Druid's SQL type of an Arrow column type (a persist's, or a table column's)."""
    if pa.types.is_timestamp(kind):
        return "TIMESTAMP"
    if pa.types.is_int64(kind):
        return "BIGINT"
    if pa.types.is_integer(kind):
        return "INTEGER"
    if pa.types.is_float64(kind) or pa.types.is_decimal(kind):
        return "DOUBLE"
    if pa.types.is_floating(kind):
        return "FLOAT"
    if pa.types.is_boolean(kind):
        return "BOOLEAN"
    if pa.types.is_date(kind):
        return "DATE"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "VARCHAR"
    return "ARRAY" if pa.types.is_list(kind) or pa.types.is_large_list(kind) else "OTHER"


def table_row(schema: str, name: str, kind: str) -> dict[str, Any]:
    return {
        "TABLE_CATALOG": DRUID,
        "TABLE_SCHEMA": schema,
        "TABLE_NAME": name,
        "TABLE_TYPE": kind,
        "IS_JOINABLE": "NO",
        "IS_BROADCAST": "NO",
    }


def column_row(
    schema: str, table: str, column: str, position: int, kind: str, nullable: bool
) -> dict[str, Any]:
    numeric = kind in ("BIGINT", "INTEGER", "DOUBLE", "FLOAT")
    return {
        "TABLE_CATALOG": DRUID,
        "TABLE_SCHEMA": schema,
        "TABLE_NAME": table,
        "COLUMN_NAME": column,
        "ORDINAL_POSITION": position,
        "COLUMN_DEFAULT": "",
        "IS_NULLABLE": "YES" if nullable else "NO",
        "DATA_TYPE": kind,
        "CHARACTER_MAXIMUM_LENGTH": None,
        "CHARACTER_OCTET_LENGTH": None,
        "NUMERIC_PRECISION": {"BIGINT": 19, "INTEGER": 10, "DOUBLE": 15, "FLOAT": 7}.get(kind)
        if numeric
        else None,
        "NUMERIC_PRECISION_RADIX": 10 if numeric else None,
        "NUMERIC_SCALE": 0 if kind in ("BIGINT", "INTEGER") else None,
        "DATETIME_PRECISION": 3 if kind == "TIMESTAMP" else None,
        "CHARACTER_SET_NAME": "UTF-16LE" if kind == "VARCHAR" else None,
        "COLLATION_NAME": None,
        "JDBC_TYPE": JDBC[kind],
    }
