"""Druid's binary input formats, decoded to records: `avro_stream` (avroBytesDecoder
schema_inline, multiple_schemas_inline, schema_registry), `avro_ocf`, and `protobuf`
(protoBytesDecoder file, inline, schema_registry).

A record becomes a JSON object, which the JSON pipeline then reads (flattenSpec included), so
every format has the same field semantics. As Druid reads them: Avro bytes and fixed values are
base64 text (UTF-8 text with binaryAsString), enums their symbol, logical types their
underlying type; Protobuf messages as Protobuf's JSON mapping writes them (lowerCamelCase field
names, 64-bit integers as text, unset fields left out).

A record that cannot be decoded raises DecodeError: it is counted and sampled as unparseable.
A schema that cannot be fetched (the registry or the descriptor's server is down, a wrong
URL, no access) raises SchemaUnavailable: the task fails with the reason and its replacement
reads the same records again, rather than count good records as unparseable because a
registry was away. A schema id the registry does not know is the
record's fault: DecodeError.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import struct
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

BINARY_FORMATS = ("avro_stream", "avro_ocf", "protobuf")
AVRO_DECODERS = ("schema_inline", "multiple_schemas_inline", "schema_registry", "schema_repo")
PROTO_DECODERS = ("file", "inline", "schema_registry")
REGISTRY_CONFIG = ("basic.auth.credentials.source", "basic.auth.user.info")
REGISTRY_TIMEOUT_S = 10.0
NOT_FOUND_CODES = (40401, 40402, 40403)  # no such subject, version, schema (Confluent's)
SCHEMAS_KEPT = 1000  # a registry decoder's schemas by id (Druid's capacity defaults higher)


class DecodeError(Exception):
    """The record cannot be decoded: it is unparseable."""


class SchemaUnavailable(Exception):
    """A schema could not be fetched: the batch is to be read again later."""


# ---------------------------------------------------------------------------------------------
# The schema registry (Confluent's API)


class Registry:
    """Schemas by id from a Confluent-compatible registry (the first of `urls` that answers),
    kept once fetched: a schema id never changes what it names."""

    def __init__(
        self,
        urls: list[str],
        config: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        capacity: int = SCHEMAS_KEPT,
    ) -> None:
        import httpx

        self.urls = [u.rstrip("/") for u in urls]
        config = config or {}
        auth = None
        user_info = config.get("basic.auth.user.info")
        if isinstance(user_info, str) and ":" in user_info:
            user, _, password = user_info.partition(":")
            auth = httpx.BasicAuth(user, password)
        plain_headers = {str(k): str(v) for k, v in (headers or {}).items() if isinstance(v, str)}
        self.client = httpx.Client(timeout=REGISTRY_TIMEOUT_S, auth=auth, headers=plain_headers)
        self.capacity = max(1, min(capacity, SCHEMAS_KEPT))
        self.kept: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def _get(self, path: str) -> dict[str, Any]:
        with self.lock:
            hit = self.kept.get(path)
            if hit is not None:
                self.kept.move_to_end(path)
                return hit
        import httpx

        problems = []
        for url in self.urls:
            try:
                answer = self.client.get(url + path)
            except httpx.HTTPError as exc:
                problems.append(f"{url}: {exc}")
                continue
            if answer.status_code != 200:
                code = _error_code(answer)
                if code in NOT_FOUND_CODES:  # the registry knows no such schema: the record's
                    raise DecodeError(f"the schema registry at {url} has no {path} ({code})")
                # anything else (a wrong URL, no access, the registry unwell) is not the
                # record's fault: nothing is counted unparseable for it
                problems.append(f"{url}: HTTP {answer.status_code}")
                continue
            try:
                found = answer.json()
            except ValueError:
                problems.append(f"{url}: the answer to {path} is not JSON")
                continue
            if not isinstance(found, dict):
                problems.append(f"{url}: the answer to {path} is not an object")
                continue
            with self.lock:
                self.kept[path] = found
                while len(self.kept) > self.capacity:
                    self.kept.popitem(last=False)
            return found
        raise SchemaUnavailable("cannot fetch a schema: " + "; ".join(problems))

    def schema(self, schema_id: int) -> dict[str, Any]:
        """{"schema": text, "schemaType": ..., "references": [...]} of an id."""
        return self._get(f"/schemas/ids/{schema_id}")

    def version(self, subject: str, version: int) -> dict[str, Any]:
        from urllib.parse import quote

        return self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}")


def _error_code(answer: Any) -> int | None:
    """Confluent's error_code of an error answer (40403: no such schema), if it has one."""
    try:
        body = answer.json()
    except ValueError:
        return None
    code = body.get("error_code") if isinstance(body, dict) else None
    return code if isinstance(code, int) else None


def registry_of(decoder: dict[str, Any]) -> Registry:
    urls = decoder.get("urls") or []
    if decoder.get("url"):  # Druid: url wins over urls
        urls = [decoder["url"]]
    capacity = decoder.get("capacity")
    return Registry(
        [str(u) for u in urls],
        decoder.get("config") or {},
        decoder.get("headers") or {},
        capacity if isinstance(capacity, int) and capacity > 0 else SCHEMAS_KEPT,
    )


def _framed(data: bytes) -> tuple[int, bytes]:
    """Confluent's wire format: magic byte, a big-endian 4-byte schema id, the rest. The magic
    byte is not checked, as Druid does not check it."""
    if len(data) < 5:
        raise DecodeError(f"a record of {len(data)} bytes has no schema id (5 bytes at least)")
    return struct.unpack(">I", data[1:5])[0], data[5:]


# ---------------------------------------------------------------------------------------------
# Avro


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
            schema_id, rest = _framed(data)
            if schema_id not in self.schemas:
                raise DecodeError(f"schema id {schema_id} is not among the decoder's schemas")
            return self.schemas[schema_id], rest
        assert self.registry is not None
        schema_id, rest = _framed(data)
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


# ---------------------------------------------------------------------------------------------
# Protobuf


def _pool(files: list[Any]) -> Any:
    """A descriptor pool of FileDescriptorProtos (each after what it imports)."""
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    by_name = {f.name: f for f in files}

    def add(proto: Any) -> None:
        if proto.name in added:
            return
        added.add(proto.name)
        for dependency in proto.dependency:
            if dependency in by_name:
                add(by_name[dependency])
            elif dependency.startswith("google/protobuf/"):
                add(_well_known(dependency))  # registered without them (skip-known-types)
        pool.Add(proto)

    for proto in files:
        add(proto)
    return pool


def _well_known(name: str) -> Any:
    """The FileDescriptorProto of one of Protobuf's well-known types (timestamp.proto...)."""
    import importlib

    from google.protobuf import descriptor_pb2

    module_name = "google.protobuf." + name.rsplit("/", 1)[-1].removesuffix(".proto") + "_pb2"
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise ValueError(f"the schema imports {name}, which is not given") from None
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    return proto


def descriptor_set(data: bytes) -> list[Any]:
    """The FileDescriptorProtos of a compiled descriptor (protoc's --descriptor_set_out)."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError as ProtoError

    try:
        files = list(descriptor_pb2.FileDescriptorSet.FromString(data).file)
    except ProtoError as exc:
        raise ValueError(f"not a compiled Protobuf descriptor set: {exc}") from None
    if not any(f.message_type for f in files):
        raise ValueError("the descriptor set defines no message type")
    return files


def message_names(files: list[Any]) -> list[str]:
    """Every top-level message's full name, in the order the descriptor lists them."""
    return [f"{f.package}.{m.name}" if f.package else m.name for f in files for m in f.message_type]


def message_type(files: list[Any], wanted: str | None) -> str:
    """The full name of the message `wanted` names (full or short), or the first one."""
    names = message_names(files)
    if not wanted:
        return names[0]
    matches = [n for n in names if n == wanted or n.rsplit(".", 1)[-1] == wanted]
    if not matches:
        raise ValueError(f"no message type {wanted} in the descriptor (it has {', '.join(names)})")
    return matches[0]


def read_descriptor(location: str) -> bytes:
    """A descriptor file's bytes: a path, a file: URL, or an http(s) URL."""
    parsed = urlparse(location)
    if parsed.scheme in ("http", "https"):
        import httpx

        try:
            answer = httpx.get(location, timeout=REGISTRY_TIMEOUT_S, follow_redirects=False)
        except httpx.HTTPError as exc:
            raise SchemaUnavailable(f"cannot fetch the descriptor {location}: {exc}") from None
        if answer.status_code != 200:
            raise SchemaUnavailable(f"the descriptor {location}: HTTP {answer.status_code}")
        return answer.content
    path = Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(location)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise SchemaUnavailable(f"cannot read the descriptor {path}: {exc.strerror}") from None


def _proto_text_files(text: str, references: dict[str, str]) -> list[Any]:
    """FileDescriptorProtos of .proto text (and the texts it imports, by import path), compiled
    with protoc (grpcio-tools)."""
    import importlib.resources

    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for name, body in {**references, "_schema.proto": text}.items():
            if name.startswith("/") or ".." in name.split("/"):
                raise ValueError(f"a reference named {name!r}")
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
        out = root / "_schema.desc"
        includes = str(importlib.resources.files("grpc_tools") / "_proto")
        code = protoc.main(
            [
                "protoc",
                f"-I{root}",
                f"-I{includes}",
                "--include_imports",
                f"--descriptor_set_out={out}",
                "_schema.proto",
            ]
        )
        if code != 0 or not out.exists():
            raise ValueError("protoc could not compile the schema")
        return descriptor_set(out.read_bytes())


def _proto_files(schema: str, references: dict[str, str]) -> list[Any]:
    """A registry's Protobuf schema: base64 of a FileDescriptorProto (as Confluent's Python
    serializer registers it) or .proto text (as its Java serializer does)."""
    from google.protobuf import descriptor_pb2

    try:
        proto = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode(schema, validate=True)
        )
        if proto.message_type:
            others = [_proto_files(text, {})[-1] for text in references.values()]
            return [*others, proto]
    except Exception:
        pass  # not base64 of a descriptor: .proto text
    return _proto_text_files(schema, references)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise DecodeError("the message index list ends early")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at  # zig-zag
        shift += 7
        if shift > 63:
            raise DecodeError("a message index is too long")


def _message_path(data: bytes) -> tuple[list[int], bytes]:
    """Confluent's message indexes after the schema id: a count, then each index; a lone 0
    is the first top-level message."""
    count, at = _varint(data, 0)
    if count == 0:
        return [0], data[at:]
    if count < 0 or count > 64:
        raise DecodeError(f"a message index list of {count} entries")
    path = []
    for _ in range(count):
        index, at = _varint(data, at)
        path.append(index)
    return path, data[at:]


class Protobuf:
    def __init__(
        self, input_format: dict[str, Any], reader: Callable[[str], bytes] = read_descriptor
    ) -> None:
        decoder = input_format.get("protoBytesDecoder") or {}
        self.kind = decoder.get("type", "schema_registry")
        self.registry: Registry | None = None
        self.classes: dict[tuple[int, tuple[int, ...]], Any] = {}
        self.fixed: Any = None
        self.wanted = decoder.get("protoMessageType")
        self.reader = reader
        self.decoder = decoder
        if self.kind == "inline":
            self.fixed = self._class(descriptor_set(base64.b64decode(decoder["descriptorString"])))
        elif self.kind == "schema_registry":
            self.registry = registry_of(decoder)
        elif self.kind != "file":
            raise ValueError(f"protoBytesDecoder type {self.kind} is not supported")

    def _class(self, files: list[Any], path: list[int] | None = None) -> Any:
        from google.protobuf import message_factory

        pool = _pool(files)
        if path is None:
            full = message_type(files, self.wanted)
            return message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
        last = files[-1]  # the registered file, after what it imports
        messages = pool.FindFileByName(last.name).message_types_by_name
        top = list(messages.values())
        if path[0] >= len(top):
            raise DecodeError(f"message index {path[0]} is not in the schema")
        descriptor = top[path[0]]
        for index in path[1:]:
            if index >= len(descriptor.nested_types):
                raise DecodeError(f"nested message index {index} is not in the schema")
            descriptor = descriptor.nested_types[index]
        return message_factory.GetMessageClass(descriptor)

    def _message_class(self, data: bytes) -> tuple[Any, bytes]:
        if self.kind == "file":
            if self.fixed is None:  # read at the first record: the task host's file
                try:
                    files = descriptor_set(self.reader(str(self.decoder.get("descriptor"))))
                except ValueError as exc:
                    raise SchemaUnavailable(f"the descriptor: {exc}") from None
                self.fixed = self._class(files)
            return self.fixed, data
        if self.fixed is not None:
            return self.fixed, data
        assert self.registry is not None
        schema_id, rest = _framed(data)
        path, payload = _message_path(rest)
        key = (schema_id, tuple(path))
        cls = self.classes.get(key)
        if cls is None:
            found = self.registry.schema(schema_id)
            if found.get("schemaType") != "PROTOBUF":
                raise DecodeError(f"schema id {schema_id} is not a PROTOBUF schema")
            references = self._references(found)
            try:
                files = _proto_files(str(found.get("schema")), references)
                cls = self._class(files, path)
            except DecodeError:
                raise
            except Exception as exc:  # a schema that cannot be built: its records cannot be read
                raise DecodeError(f"schema id {schema_id}: {exc}") from None
            self.classes[key] = cls
        return cls, payload

    def _references(self, found: dict[str, Any], depth: int = 0) -> dict[str, str]:
        """The texts a registry schema imports, by import path, and what they import."""
        assert self.registry is not None
        if depth > 16:
            raise DecodeError("schema references nest deeper than 16")
        texts: dict[str, str] = {}
        for reference in found.get("references") or []:
            version = self.registry.version(str(reference["subject"]), int(reference["version"]))
            texts |= self._references(version, depth + 1)
            texts[str(reference.get("name"))] = str(version["schema"])
        return texts

    def decode(self, data: bytes) -> list[dict[str, Any]]:
        from google.protobuf import json_format
        from google.protobuf.message import DecodeError as ProtoError

        cls, payload = self._message_class(data)
        try:
            message = cls.FromString(payload)
        except ProtoError as exc:
            raise DecodeError(f"not a {cls.DESCRIPTOR.full_name} message: {exc}") from None
        return [json_format.MessageToDict(message)]


# ---------------------------------------------------------------------------------------------


Decoder = AvroStream | AvroOcf | Protobuf
_made: dict[str, Decoder] = {}
_made_lock = threading.Lock()


def decoder(input_format: dict[str, Any]) -> Decoder:
    """The decoder of an inputFormat (its JSON), made once per process: its registry's
    schemas are fetched once."""
    key = json.dumps(input_format, sort_keys=True)
    with _made_lock:
        made = _made.get(key)
        if made is None:
            kind = input_format.get("type")
            made = (
                AvroStream(input_format)
                if kind == "avro_stream"
                else AvroOcf(input_format)
                if kind == "avro_ocf"
                else Protobuf(input_format)
            )
            _made[key] = made
        return made


def json_texts(made: Decoder, data: bytes | None) -> list[tuple[str | None, str | None]]:
    """A Kafka value as (JSON text, None) per record it holds, or [(None, why)] when it cannot
    be decoded. SchemaUnavailable is raised."""
    import orjson

    if data is None:
        return [(None, "Unable to parse row: the record has no value")]
    try:
        records = made.decode(bytes(data))
        return [(orjson.dumps(r, option=orjson.OPT_NON_STR_KEYS).decode(), None) for r in records]
    except DecodeError as exc:
        return [(None, f"Unable to parse row: {exc}")]
    except orjson.JSONEncodeError as exc:
        return [(None, f"Unable to parse row: {exc}")]
