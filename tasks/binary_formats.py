"""What a spec's avro_stream, avro_ocf or protobuf inputFormat must hold, checked at submit
(every problem a 400 naming its field), and the URLs and files it names, which the operator
must allow before a task fetches or reads them (supervisor/schemas/kafka_access.py)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tasks.rows.avro import avro_schema
from tasks.rows.decoding import AVRO_DECODERS, PROTO_DECODERS, REGISTRY_CONFIG
from tasks.rows.protobuf import descriptor_set, message_type


def _registry(decoder: dict[str, Any], path: str) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    url, urls = decoder.get("url"), decoder.get("urls")
    if url is None and urls is None:
        return [(f"{path}.url", "a schema_registry decoder needs url (or urls)")]
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        problems.append((f"{path}.url", "must be an http:// or https:// URL"))
    if urls is not None and (
        not isinstance(urls, list)
        or not urls
        or not all(isinstance(u, str) and u.startswith(("http://", "https://")) for u in urls)
    ):
        problems.append((f"{path}.urls", "must be a list of http:// or https:// URLs"))
    config = decoder.get("config") or {}
    if not isinstance(config, dict):
        problems.append((f"{path}.config", "must be an object"))
    else:
        for key in config:
            if key not in REGISTRY_CONFIG:
                problems.append(
                    (
                        f"{path}.config.{key}",
                        "is not supported; supported: " + ", ".join(REGISTRY_CONFIG),
                    )
                )
        source = config.get("basic.auth.credentials.source", "USER_INFO")
        if source != "USER_INFO":  # URL would carry the password in the URL, shown unmasked
            problems.append(
                (
                    f"{path}.config.basic.auth.credentials.source",
                    "must be USER_INFO (give the credentials in basic.auth.user.info)",
                )
            )
    for field, given in (("url", url), *((f"urls[{i}]", u) for i, u in enumerate(urls or []))):
        if isinstance(given, str) and "@" in given.split("//", 1)[-1].split("/", 1)[0]:
            problems.append(
                (f"{path}.{field}", "must not hold credentials; use config.basic.auth.user.info")
            )
    headers = decoder.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        problems.append((f"{path}.headers", "must map header names to text values"))
    capacity = decoder.get("capacity")
    if capacity is not None and (
        not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1
    ):
        problems.append((f"{path}.capacity", "must be a positive number"))
    return problems


def _schema(raw: Any, path: str) -> list[tuple[str, str]]:
    try:
        avro_schema(raw)
    except ValueError as exc:
        return [(path, str(exc))]
    return []


def _avro_stream(extra: dict[str, Any], path: str) -> list[tuple[str, str]]:
    decoder = extra.get("avroBytesDecoder")
    where = f"{path}.avroBytesDecoder"
    if not isinstance(decoder, dict):
        return [(where, "an avro_stream input format needs its avroBytesDecoder")]
    kind = decoder.get("type", "schema_repo")
    if kind not in AVRO_DECODERS:
        return [(f"{where}.type", f"must be one of {', '.join(AVRO_DECODERS)}")]
    if kind == "schema_repo":
        return [
            (
                f"{where}.type",
                "schema_repo (the AVRO-1124 schema repository) is not supported; use "
                "schema_registry or schema_inline",
            )
        ]
    if kind == "schema_inline":
        if decoder.get("schema") is None:
            return [(f"{where}.schema", "is required")]
        return _schema(decoder["schema"], f"{where}.schema")
    if kind == "multiple_schemas_inline":
        schemas = decoder.get("schemas")
        if not isinstance(schemas, dict) or not schemas:
            return [(f"{where}.schemas", "must map schema ids to Avro schemas")]
        problems = []
        for key, schema in schemas.items():
            if not str(key).isdigit():
                problems.append((f"{where}.schemas.{key}", "schema ids are numbers"))
            problems += _schema(schema, f"{where}.schemas.{key}")
        return problems
    return _registry(decoder, where)


def _protobuf(extra: dict[str, Any], path: str) -> list[tuple[str, str]]:
    decoder = extra.get("protoBytesDecoder")
    where = f"{path}.protoBytesDecoder"
    if not isinstance(decoder, dict):
        return [(where, "a protobuf input format needs its protoBytesDecoder")]
    kind = decoder.get("type", "schema_registry")
    if kind not in PROTO_DECODERS:
        return [(f"{where}.type", f"must be one of {', '.join(PROTO_DECODERS)}")]
    wanted = decoder.get("protoMessageType")
    if wanted is not None and not isinstance(wanted, str):
        return [(f"{where}.protoMessageType", "must be a message type's name")]
    if kind == "file":
        descriptor = decoder.get("descriptor")
        if not isinstance(descriptor, str) or not descriptor:
            return [(f"{where}.descriptor", "names the compiled descriptor: a path or URL")]
        return []
    if kind == "inline":
        text = decoder.get("descriptorString")
        if not isinstance(text, str):
            return [(f"{where}.descriptorString", "is required: a compiled descriptor in base64")]
        try:
            files = descriptor_set(base64.b64decode(text, validate=True))
            message_type(files, wanted)
        except (ValueError, binascii.Error) as exc:
            return [(f"{where}.descriptorString", str(exc))]
        return []
    return _registry(decoder, where)


def problems(input_format: Any, path: str) -> list[tuple[str, str]]:
    """(field, reason) for each problem of a binary inputFormat's own fields."""
    extra = input_format.model_extra or {}
    found: list[tuple[str, str]] = []
    for flag in ("binaryAsString", "extractUnionsByType"):
        given = extra.get(flag)
        if given is not None and not isinstance(given, bool):
            found.append((f"{path}.{flag}", "must be true or false"))
    if input_format.type == "avro_stream":
        found += _avro_stream(extra, path)
    elif input_format.type == "avro_ocf":
        if extra.get("schema") is not None:
            found += _schema(extra["schema"], f"{path}.schema")
    else:
        found += _protobuf(extra, path)
    return found


def locations(input_format: dict[str, Any], path: str) -> list[tuple[str, str]]:
    """(field, URL or path) of every registry URL and descriptor file a binary inputFormat (or a
    kafka one's valueFormat) names: what a task would fetch or read."""
    if input_format.get("type") == "kafka":
        value = input_format.get("valueFormat")
        return locations(value, f"{path}.valueFormat") if isinstance(value, dict) else []
    named: list[tuple[str, str]] = []
    for key in ("avroBytesDecoder", "protoBytesDecoder"):
        decoder = input_format.get(key)
        if not isinstance(decoder, dict):
            continue
        where = f"{path}.{key}"
        if isinstance(decoder.get("url"), str):
            named.append((f"{where}.url", decoder["url"]))
        for index, url in enumerate(decoder.get("urls") or []):
            if isinstance(url, str):
                named.append((f"{where}.urls[{index}]", url))
        if key == "protoBytesDecoder" and isinstance(decoder.get("descriptor"), str):
            named.append((f"{where}.descriptor", decoder["descriptor"]))
    return named
