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

import json
import threading
from typing import Any

from tasks.rows.avro import AvroOcf, AvroStream
from tasks.rows.decoding import DecodeError
from tasks.rows.protobuf import Protobuf

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
