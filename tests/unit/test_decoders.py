"""Avro and Protobuf records decoded as Druid reads them (the registry: tests/integration)."""

from __future__ import annotations

import base64
import io
import json
import struct
from typing import Any

import fastavro
import pytest

from tasks import binary_formats
from tasks.rows import protobuf
from tasks.rows.avro import AvroOcf, AvroStream
from tasks.rows.decoders import json_texts
from tasks.rows.decoding import DecodeError
from tasks.rows.protobuf import Protobuf
from tasks.spec.io_config import InputFormat
from tests import wikipedia

EVENT = wikipedia.event(7)


def avro_bytes(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def test_inline_avro_reads_a_record_of_its_schema() -> None:
    made = AvroStream(
        {"avroBytesDecoder": {"type": "schema_inline", "schema": wikipedia.AVRO_SCHEMA}}
    )
    assert made.decode(avro_bytes(wikipedia.AVRO_SCHEMA, EVENT)) == [EVENT]
    with pytest.raises(DecodeError):
        made.decode(b"\x02")  # cut short


def test_avro_values_as_druid_reads_them() -> None:
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "b", "type": "bytes"},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "u", "type": ["null", "string"]},
            {"name": "m", "type": {"type": "map", "values": "int"}},
            {
                "name": "sub",
                "type": {"type": "record", "name": "S", "fields": [{"name": "x", "type": "int"}]},
            },
        ],
    }
    record = {
        "b": b"hi",
        "f": b"ok",
        "e": "B",
        "t": 1_700_000_000_000,
        "u": None,
        "m": {"k": 1},
        "sub": {"x": 3},
    }
    data = avro_bytes({**schema}, {**record})
    decoded = AvroStream({"avroBytesDecoder": {"type": "schema_inline", "schema": schema}})
    (plain,) = decoded.decode(data)
    assert plain == {**record, "b": "aGk=", "f": "b2s="}  # bytes as base64; the long as is
    as_text = AvroStream(
        {"binaryAsString": True, "avroBytesDecoder": {"type": "schema_inline", "schema": schema}}
    )
    assert as_text.decode(data)[0]["b"] == "hi"


UNION_SUB = {
    "type": "record",
    "name": "UnionSubRecord",
    "fields": [{"name": "s", "type": "string"}],
}
UNIONS = {
    "type": "record",
    "name": "Datum",
    "namespace": "org.example",
    "fields": [
        {
            "name": "many",
            "type": [
                "null",
                "int",
                "float",
                "string",
                "bytes",
                {"type": "array", "items": "int"},
                {"type": "map", "values": "int"},
                UNION_SUB,
                {"type": "fixed", "name": "UnionSubFixed", "size": 2},
                {"type": "enum", "name": "UnionSubEnum", "symbols": ["ENUM1", "ENUM2"]},
            ],
        },
        {"name": "optional", "type": ["null", "long"]},
        {"name": "named", "type": ["null", "UnionSubRecord"]},
        {"name": "nested", "type": {"type": "array", "items": "Datum2"}},
    ],
}
NESTED = {
    "type": "record",
    "name": "Datum2",
    "namespace": "org.example",
    "fields": [{"name": "either", "type": ["long", "boolean"]}],
}


@pytest.mark.parametrize(
    ("value", "extracted"),
    [
        (7, {"int": 7}),
        (1.5, {"float": 1.5}),
        ("text", {"string": "text"}),
        (b"\x01", {"bytes": "AQ=="}),
        ([1, 2, 3], {"array": [1, 2, 3]}),
        ({"one": 1}, {"map": {"one": 1}}),
        (("org.example.UnionSubRecord", {"s": "sub"}), {"UnionSubRecord": {"s": "sub"}}),
        (("org.example.UnionSubFixed", b"ok"), {"UnionSubFixed": "b2s="}),
        (("org.example.UnionSubEnum", "ENUM1"), {"UnionSubEnum": "ENUM1"}),
        (None, {}),
    ],
)
def test_extract_unions_by_type_keys_a_union_field_by_its_member(
    value: Any, extracted: dict[str, Any]
) -> None:
    """Druid's extractUnionsByType: a field whose union has two or more members besides null
    becomes {member: value}, by type name or by (unqualified) name; null is {}. A null-or-one
    union is left as its value; unions in nested records are extracted too."""
    schema = fastavro.parse_schema(NESTED)
    schema = fastavro.parse_schema(UNIONS, named_schemas=schema["__named_schemas"])
    record = {
        "many": value,
        "optional": 5,
        "named": ("org.example.UnionSubRecord", {"s": "x"}),
        "nested": [{"either": 3}, {"either": True}],
    }
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    writer = {
        **UNIONS,
        "fields": [
            *UNIONS["fields"][:3],
            {"name": "nested", "type": {"type": "array", "items": NESTED}},
        ],
    }
    made = AvroStream(
        {
            "extractUnionsByType": True,
            "avroBytesDecoder": {"type": "schema_inline", "schema": writer},
        }
    )
    (decoded,) = made.decode(out.getvalue())
    assert decoded == {
        "many": extracted,
        "optional": 5,
        "named": {"s": "x"},
        "nested": [{"either": {"long": 3}}, {"either": {"boolean": True}}],
    }
    plain = AvroStream({"avroBytesDecoder": {"type": "schema_inline", "schema": writer}})
    assert plain.decode(out.getvalue())[0]["named"] == {"s": "x"}  # the option off: values
    ocf = io.BytesIO()
    fastavro.writer(ocf, fastavro.parse_schema(writer), [record])
    assert AvroOcf({"extractUnionsByType": True}).decode(ocf.getvalue()) == [decoded]


def test_multiple_schemas_inline_reads_the_version_byte_and_id() -> None:
    made = AvroStream(
        {
            "avroBytesDecoder": {
                "type": "multiple_schemas_inline",
                "schemas": {"7": wikipedia.AVRO_SCHEMA},
            }
        }
    )
    body = avro_bytes(wikipedia.AVRO_SCHEMA, EVENT)
    assert made.decode(b"\x01" + struct.pack(">I", 7) + body) == [EVENT]
    for bad in (b"\x00" + struct.pack(">I", 7) + body, b"\x01" + struct.pack(">I", 8) + body):
        with pytest.raises(DecodeError):
            made.decode(bad)


def test_an_object_container_file_holds_several_records() -> None:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(wikipedia.AVRO_SCHEMA), [EVENT, wikipedia.event(8)])
    assert AvroOcf({}).decode(out.getvalue()) == [EVENT, wikipedia.event(8)]
    with pytest.raises(DecodeError):
        AvroOcf({}).decode(b"not a file")


def test_an_object_container_file_reads_logical_types_as_their_underlying_type() -> None:
    """As avro_stream does (and Druid): a timestamp-millis is its long, in a union too."""
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "t", "type": millis},
            {"name": "u", "type": ["null", millis, "string"]},
        ],
    }
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [{"t": 1_700_000_000_000, "u": 5}])
    assert AvroOcf({}).decode(out.getvalue()) == [{"t": 1_700_000_000_000, "u": 5}]
    by_type = AvroOcf({"extractUnionsByType": True}).decode(out.getvalue())
    assert by_type == [{"t": 1_700_000_000_000, "u": {"long": 5}}]


def test_protobuf_from_a_descriptor_file_and_inline() -> None:
    message = wikipedia.message_class()(**EVENT)
    data = message.SerializeToString()
    made = Protobuf(
        {"protoBytesDecoder": {"type": "file", "descriptor": "file:///x/wiki.desc"}},
        reader=lambda location: wikipedia.descriptor_set(),
    )
    (record,) = made.decode(data)
    assert record == EVENT  # every field set (int32 stays a number)
    inline = Protobuf(
        {
            "protoBytesDecoder": {
                "type": "inline",
                "descriptorString": base64.b64encode(wikipedia.descriptor_set()).decode(),
                "protoMessageType": "Wikipedia",
            }
        }
    )
    assert inline.decode(data) == [EVENT]
    with pytest.raises(DecodeError):
        inline.decode(b"\xff\xff\xff")


def test_confluent_message_indexes() -> None:
    assert protobuf._message_path(b"\x00rest") == ([0], b"rest")
    assert protobuf._message_path(b"\x04\x02\x00rest") == ([1, 0], b"rest")
    with pytest.raises(DecodeError):
        protobuf._message_path(b"\x04\x02")


def test_json_texts_say_why_a_record_is_unparseable() -> None:
    made = AvroStream(
        {"avroBytesDecoder": {"type": "schema_inline", "schema": wikipedia.AVRO_SCHEMA}}
    )
    ((text, error),) = json_texts(made, avro_bytes(wikipedia.AVRO_SCHEMA, EVENT))
    assert error is None and text is not None and json.loads(text) == EVENT
    ((text, error),) = json_texts(made, b"\x02")
    assert text is None and error is not None and error.startswith("Unable to parse row: ")
    assert json_texts(made, None)[0][0] is None


@pytest.mark.parametrize(
    ("input_format", "field", "reason"),
    [
        ({"type": "avro_stream"}, "avroBytesDecoder", "needs its avroBytesDecoder"),
        ({"type": "avro_stream", "avroBytesDecoder": {}}, "avroBytesDecoder.type", "schema_repo"),
        (
            {"type": "avro_stream", "avroBytesDecoder": {"type": "schema_inline", "schema": 3}},
            "avroBytesDecoder.schema",
            "not an Avro schema",
        ),
        (
            {"type": "avro_stream", "avroBytesDecoder": {"type": "schema_registry"}},
            "avroBytesDecoder.url",
            "needs url",
        ),
        (
            {
                "type": "avro_stream",
                "avroBytesDecoder": {
                    "type": "schema_registry",
                    "url": "http://r",
                    "config": {"schema.registry.ssl.truststore.location": "/etc/x"},
                },
            },
            "avroBytesDecoder.config.schema.registry.ssl.truststore.location",
            "not supported",
        ),
        (
            {
                "type": "avro_stream",
                "extractUnionsByType": "yes",
                "avroBytesDecoder": {"type": "schema_inline", "schema": "string"},
            },
            "extractUnionsByType",
            "must be true or false",
        ),
        ({"type": "avro_ocf", "schema": {"type": "nope"}}, "schema", "not an Avro schema"),
        (
            {"type": "protobuf", "protoBytesDecoder": {"type": "file"}},
            "protoBytesDecoder.descriptor",
            "",
        ),
        (
            {
                "type": "protobuf",
                "protoBytesDecoder": {"type": "inline", "descriptorString": "eA=="},
            },
            "protoBytesDecoder.descriptorString",
            "",
        ),
        (
            {
                "type": "protobuf",
                "protoBytesDecoder": {
                    "type": "inline",
                    "descriptorString": base64.b64encode(wikipedia.descriptor_set()).decode(),
                    "protoMessageType": "Other",
                },
            },
            "protoBytesDecoder.descriptorString",
            "no message type Other",
        ),
    ],
)
def test_binary_format_problems_name_their_field(
    input_format: dict[str, Any], field: str, reason: str
) -> None:
    found = dict(binary_formats.problems(InputFormat.model_validate(input_format), "f"))
    assert f"f.{field}" in found, found
    assert reason in found[f"f.{field}"]


def test_locations_are_every_url_and_file_a_format_names() -> None:
    given = {
        "type": "kafka",
        "valueFormat": {
            "type": "protobuf",
            "protoBytesDecoder": {"type": "file", "descriptor": "file:///d/w.desc"},
        },
    }
    assert binary_formats.locations(given, "f") == [
        ("f.valueFormat.protoBytesDecoder.descriptor", "file:///d/w.desc")
    ]
    registry = {
        "type": "avro_stream",
        "avroBytesDecoder": {"type": "schema_registry", "urls": ["http://a", "http://b"]},
    }
    assert [u for _, u in binary_formats.locations(registry, "f")] == ["http://a", "http://b"]
