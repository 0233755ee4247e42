"""Druid's `protobuf` input format, decoded to records (protoBytesDecoder file, inline,
schema_registry; tasks/rows/decoders.py): descriptors from a file, a URL or a registry's .proto
text, messages as Protobuf's JSON mapping writes them."""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from tasks.rows.decoding import (
    REGISTRY_TIMEOUT_S,
    DecodeError,
    Registry,
    SchemaUnavailable,
    framed,
    registry_of,
)


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
        schema_id, rest = framed(data)
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
