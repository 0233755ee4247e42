"""Druid's legacy dataSchema.parser read as the inputFormat it stands for."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.schemas.spec import parse_supervisor_spec
from tasks.spec.errors import SpecError
from tests.specs import spec

TIMESTAMP = {"column": "time", "format": "auto"}
DIMENSIONS = {"dimensions": ["page", {"type": "long", "name": "deleted"}]}


def with_parser(parser: dict[str, Any], **schema: Any) -> dict[str, Any]:
    body = spec()
    del body["spec"]["ioConfig"]["inputFormat"]
    for key in ("timestampSpec", "dimensionsSpec"):
        body["spec"]["dataSchema"].pop(key, None)
    body["spec"]["dataSchema"].update(parser=parser, **schema)
    return body


def parse_spec(fmt: str | None = "json", **more: Any) -> dict[str, Any]:
    given = {"timestampSpec": TIMESTAMP, "dimensionsSpec": DIMENSIONS, **more}
    return given if fmt is None else {"format": fmt, **given}


@pytest.mark.parametrize(
    ("parser", "input_format"),
    [
        ({"type": "string", "parseSpec": parse_spec()}, {"type": "json"}),
        ({"parseSpec": parse_spec()}, {"type": "json"}),  # string is the default type
        (
            {"type": "string", "parseSpec": parse_spec(flattenSpec={"fields": ["page"]})},
            {"type": "json", "flattenSpec": {"fields": ["page"]}},
        ),
        (
            {
                "type": "string",
                "parseSpec": parse_spec("csv", columns=["time", "page"], hasHeaderRow=True),
            },
            {"type": "csv", "columns": ["time", "page"], "findColumnsFromHeader": True},
        ),
        (  # tsv is the default format
            {"type": "string", "parseSpec": parse_spec(None, columns=["time", "page"])},
            {"type": "tsv", "columns": ["time", "page"]},
        ),
        (
            {
                "type": "avro_stream",
                "avroBytesDecoder": {"type": "schema_inline", "schema": {"type": "string"}},
                "parseSpec": parse_spec("avro"),
            },
            {
                "type": "avro_stream",
                "avroBytesDecoder": {"type": "schema_inline", "schema": {"type": "string"}},
            },
        ),
        (  # the older protobuf style wins over protoBytesDecoder, as in Druid
            {
                "type": "protobuf",
                "descriptor": "file:///p/wiki.desc",
                "protoMessageType": "Wikipedia",
                "protoBytesDecoder": {"type": "schema_registry", "url": "http://r"},
                "parseSpec": parse_spec(),
            },
            {
                "type": "protobuf",
                "protoBytesDecoder": {
                    "type": "file",
                    "descriptor": "file:///p/wiki.desc",
                    "protoMessageType": "Wikipedia",
                },
            },
        ),
    ],
)
def test_a_parser_is_read_as_its_input_format(
    parser: dict[str, Any], input_format: dict[str, Any]
) -> None:
    from tasks.spec.legacy_parser import input_format_of

    assert input_format_of(parser, "dataSchema.parser") == input_format


def test_the_parse_specs_timestamp_and_dimensions_are_the_data_schemas() -> None:
    parsed = parse_supervisor_spec(with_parser({"type": "string", "parseSpec": parse_spec()}))
    schema, io = parsed.spec.dataSchema, parsed.spec.ioConfig
    assert io.inputFormat is not None and io.inputFormat.type == "json"
    assert (schema.timestampSpec.column, schema.dimensionsSpec.names()) == (
        "time",
        ["page", "deleted"],
    )
    assert schema.parser is not None  # kept as given
    # the normalized spec (what is stored, and read back) parses again to the same
    stored = parsed.to_json()
    assert parse_supervisor_spec(stored).to_json() == stored


@pytest.mark.parametrize(
    ("parser", "schema", "field", "reason"),
    [
        ({"parseSpec": parse_spec("javascript")}, {}, "parseSpec.format", "JavaScript"),
        ({"parseSpec": parse_spec("regex")}, {}, "parseSpec.format", "not supported yet"),
        ({"parseSpec": parse_spec("xml")}, {}, "parseSpec.format", "unknown format 'xml'"),
        ({"type": "parquet", "parseSpec": parse_spec()}, {}, "type", "not read by a Kafka"),
        ({"type": "string"}, {}, "parseSpec", "needs its parseSpec"),
        ({"type": "avro_stream", "parseSpec": parse_spec("avro")}, {}, "avroBytesDecoder", ""),
        ({"type": "protobuf", "parseSpec": parse_spec()}, {}, "protoBytesDecoder", ""),
        (
            {"parseSpec": parse_spec()},
            {"timestampSpec": {"column": "other"}},
            "timestampSpec",
            "differs from the parser's",
        ),
    ],
)
def test_parsers_that_cannot_be_read_are_a_clear_error(
    parser: dict[str, Any], schema: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(SpecError) as raised:
        parse_supervisor_spec(with_parser(parser, **schema))
    (error,) = raised.value.errors
    prefix = "spec.dataSchema." if field in ("timestampSpec",) else "spec.dataSchema.parser."
    assert error.field == prefix + field and reason in error.reason


def test_a_parser_beside_another_input_format_is_refused() -> None:
    body = with_parser({"parseSpec": parse_spec()})
    body["spec"]["ioConfig"]["inputFormat"] = {"type": "csv", "columns": ["a"]}
    with pytest.raises(SpecError, match="differ"):
        parse_supervisor_spec(body)
