"""Druid's Avro input formats, decoded to records: `avro_stream` (avroBytesDecoder
schema_inline, multiple_schemas_inline, schema_registry) and `avro_ocf` (tasks/rows/decoders.py)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import threading
from collections import OrderedDict
from typing import Any

from tasks.rows.decoding import SCHEMAS_KEPT, DecodeError, Registry, framed, registry_of


def _without_logical_types(schema: Any) -> Any:
    """Druid reads Avro logical types as their underlying type (a timestamp-millis as a long)."""
    if isinstance(schema, dict):
        return {k: _without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_without_logical_types(s) for s in schema]
    return schema


def avro_schema(raw: Any) -> Any:
    """A parsed Avro schema; ValueError saying why when it is not one."""
    import fastavro

    if isinstance(raw, str):
        with contextlib.suppress(ValueError):  # else a bare type name ("string")
            raw = json.loads(raw)
    try:
        return fastavro.parse_schema(_without_logical_types(raw))
    except Exception as exc:
        raise ValueError(f"not an Avro schema: {exc}") from None


def plain(value: Any, binary_as_string: bool) -> Any:
    """A decoded Avro value as JSON can hold it: bytes as base64 (or UTF-8) text."""
    if isinstance(value, bytes | bytearray):
        if binary_as_string:
            return bytes(value).decode("utf-8", errors="replace")
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {str(k): plain(v, binary_as_string) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, binary_as_string) for v in value]
    return value


_UNNAMED = {  # a decoded value's Python type: the union members it can be, in Druid's key order
    bool: ("boolean",),
    int: ("int", "long"),
    float: ("float", "double"),
    str: ("string",),
    bytes: ("bytes",),
    list: ("array",),
    dict: ("map",),
}


def _kind(schema: Any) -> str:
    return schema if isinstance(schema, str) else schema["type"] if isinstance(schema, dict) else ""


class UnionsByType:
    """Druid's `extractUnionsByType`: a record field whose union has more than one member
    besides null reads as an object keyed by the member its value is: the type name of a
    primitive, `array` or `map`; the (unqualified) name of a record, enum or fixed. A null is
    `{}`. Unions elsewhere (array items, map values, null-or-one-type fields) read as their
    value. Fed the values fastavro reads with `return_named_type` (a named member as (full
    name, value)). Between int and long, or float and double, a value is keyed by the first
    of the two its union has: the decoded value does not tell them apart."""

    def __init__(self, schema: Any) -> None:
        self.named: dict[str, Any] = (
            schema.get("__named_schemas", {}) if isinstance(schema, dict) else {}
        )

    def _schema(self, schema: Any) -> Any:
        return self.named.get(schema, schema) if isinstance(schema, str) else schema

    def value(self, schema: Any, value: Any) -> Any:
        schema = self._schema(schema)
        if isinstance(schema, list):  # a union not exploded: its member's value
            if isinstance(value, tuple):
                name, inner = value
                return self.value(name, inner)
            return self.value(self._unnamed(schema, value), value)
        kind = _kind(schema)
        if kind == "record" and isinstance(value, dict):
            return {
                f["name"]: self._field(f["type"], value.get(f["name"])) for f in schema["fields"]
            }
        if kind == "array" and isinstance(value, list):
            return [self.value(schema["items"], v) for v in value]
        if kind == "map" and isinstance(value, dict):
            return {k: self.value(schema["values"], v) for k, v in value.items()}
        return value

    def _field(self, schema: Any, value: Any) -> Any:
        schema = self._schema(schema)
        members = [m for m in schema if _kind(m) != "null"] if isinstance(schema, list) else []
        if len(members) < 2:
            return self.value(schema, value)
        if value is None:
            return {}
        if isinstance(value, tuple):
            name, inner = value
            return {name.rsplit(".", 1)[-1]: self.value(name, inner)}
        member = self._unnamed(schema, value)
        return {_kind(self._schema(member)): self.value(member, value)}

    def _unnamed(self, union: list[Any], value: Any) -> Any:
        if value is None:
            return "null"
        names = _UNNAMED.get(type(value), ())
        for member in union:
            if _kind(self._schema(member)) in names:
                return member
        raise DecodeError(f"a {type(value).__name__} value is of no member of its union")


def _record(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DecodeError(f"the record is a {type(value).__name__}, not a record of fields")
    return value


def _read(payload: bytes, schema: Any, by_type: bool) -> Any:
    import fastavro

    value = fastavro.schemaless_reader(io.BytesIO(payload), schema, None, return_named_type=by_type)
    return UnionsByType(schema).value(schema, value) if by_type else value


class AvroStream:
    def __init__(self, input_format: dict[str, Any]) -> None:
        self.binary_as_string = bool(input_format.get("binaryAsString", False))
        self.by_type = bool(input_format.get("extractUnionsByType", False))
        decoder = input_format.get("avroBytesDecoder") or {}
        self.kind = decoder.get("type", "schema_repo")
        self.inline = None
        self.schemas: dict[int, Any] = {}
        self.registry: Registry | None = None
        if self.kind == "schema_inline":
            self.inline = avro_schema(decoder.get("schema"))
        elif self.kind == "multiple_schemas_inline":
            self.schemas = {int(k): avro_schema(v) for k, v in decoder["schemas"].items()}
        elif self.kind == "schema_registry":
            self.registry = registry_of(decoder)
            self.by_id: dict[int, Any] = {}
        else:
            raise ValueError(f"avroBytesDecoder type {self.kind} is not supported")

    def _schema(self, data: bytes) -> tuple[Any, bytes]:
        if self.inline is not None:
            return self.inline, data
        if self.kind == "multiple_schemas_inline":
            if not data or data[0] != 1:
                raise DecodeError("a multiple_schemas_inline record starts with version byte 1")
            schema_id, rest = framed(data)
            if schema_id not in self.schemas:
                raise DecodeError(f"schema id {schema_id} is not among the decoder's schemas")
            return self.schemas[schema_id], rest
        assert self.registry is not None
        schema_id, rest = framed(data)
        schema = self.by_id.get(schema_id)
        if schema is None:
            found = self.registry.schema(schema_id)
            if found.get("schemaType", "AVRO") != "AVRO":
                raise DecodeError(f"schema id {schema_id} is a {found.get('schemaType')} schema")
            try:
                schema = avro_schema(found.get("schema"))
            except ValueError as exc:
                raise DecodeError(f"schema id {schema_id}: {exc}") from None
            self.by_id[schema_id] = schema
        return schema, rest

    def decode(self, data: bytes) -> list[dict[str, Any]]:
        schema, payload = self._schema(data)
        try:
            value = _read(payload, schema, self.by_type)
        except (EOFError, ValueError, IndexError, TypeError, UnicodeDecodeError) as exc:
            raise DecodeError(f"not an Avro record of its schema: {exc}") from None
        return [_record(plain(value, self.binary_as_string))]


class AvroOcf:
    """Each Kafka record an Avro object container file, of one or more records."""

    def __init__(self, input_format: dict[str, Any]) -> None:
        self.binary_as_string = bool(input_format.get("binaryAsString", False))
        self.by_type = bool(input_format.get("extractUnionsByType", False))
        given = input_format.get("schema")
        self.reader_schema = avro_schema(given) if given is not None else None
        self.writers: OrderedDict[str, Any] = OrderedDict()  # files' schemas, parsed

        self.lock = threading.Lock()

    def _writer(self, schema: Any) -> Any:
        key = json.dumps(schema, sort_keys=True)
        with self.lock:
            parsed = self.writers.get(key)
            if parsed is None:
                parsed = self.writers[key] = avro_schema(schema)
                if len(self.writers) > SCHEMAS_KEPT:
                    self.writers.popitem(last=False)
            return parsed

    def decode(self, data: bytes) -> list[dict[str, Any]]:
        import fastavro

        records: list[Any] = []
        try:
            for block in fastavro.block_reader(io.BytesIO(data)):
                # its records read by the file's schema without its logical types (as
                # avro_stream reads them, and Druid: a timestamp-millis is its long)
                writer = self._writer(block.writer_schema)
                schema = self.reader_schema or writer
                unions = UnionsByType(schema) if self.by_type else None
                body = block.bytes_  # type: ignore[attr-defined]  # the block, decompressed
                for _ in range(block.num_records):
                    record = fastavro.schemaless_reader(
                        body, writer, self.reader_schema, return_named_type=self.by_type
                    )
                    records.append(unions.value(schema, record) if unions else record)
        except Exception as exc:
            raise DecodeError(f"not an Avro object container file: {exc}") from None
        return [_record(plain(r, self.binary_as_string)) for r in records]
