"""Druid's legacy `dataSchema.parser`, read as the inputFormat it stands for.

Long-lived Druid specs still carry a parser (deprecated since Druid 0.17) instead of
`ioConfig.inputFormat`: a `string` parser whose parseSpec names the format (json, csv, tsv),
an `avro_stream` parser with its avroBytesDecoder, a `protobuf` parser with its
protoBytesDecoder (or the older descriptor and protoMessageType). The parseSpec's
timestampSpec and dimensionsSpec are the dataSchema's. The parser stays in the spec as given;
the inputFormat it is read as is filled in beside it, and the supervisor's status says so.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from tasks.spec.base import DruidModel
from tasks.spec.data_schema import DimensionsSpec, TimestampSpec
from tasks.spec.errors import SpecError
from tasks.spec.io_config import InputFormat
from tasks.spec.written import derived_exclusions, written_dimension

_STRING_FORMATS = ("json", "csv", "tsv")
_REFUSED_FORMATS = {
    "jsonLowercase": "is deprecated in Druid and not read here; use format json",
    "javascript": "runs JavaScript, which Sluicegate does not (Druid disables it by default)",
    "regex": "is not supported yet; supported: json, csv, tsv",
    "timeAndDims": "is for Hadoop parsers; a Kafka supervisor reads json, csv or tsv",
}


def input_format_of(parser: dict[str, Any], path: str) -> dict[str, Any]:
    """The inputFormat a legacy parser stands for; a SpecError naming the field otherwise."""
    kind = parser.get("type", "string")
    parse_spec = parser.get("parseSpec")
    if not isinstance(parse_spec, dict):
        raise SpecError.single(f"{path}.parseSpec", "a parser needs its parseSpec")
    flatten = parse_spec.get("flattenSpec")
    if kind == "string":
        fmt = parse_spec.get("format", "tsv")  # Druid's default when format is absent
        if fmt in _REFUSED_FORMATS:
            raise SpecError.single(f"{path}.parseSpec.format", f"'{fmt}' {_REFUSED_FORMATS[fmt]}")
        if fmt not in _STRING_FORMATS:
            raise SpecError.single(
                f"{path}.parseSpec.format",
                f"unknown format '{fmt}'; a string parser reads json, csv or tsv",
            )
        if fmt == "json":
            return {"type": "json", **({"flattenSpec": flatten} if flatten is not None else {})}
        translated: dict[str, Any] = {"type": fmt}
        for key in ("delimiter", "listDelimiter", "columns", "skipHeaderRows"):
            if key in parse_spec and not (fmt == "csv" and key == "delimiter"):
                translated[key] = parse_spec[key]
        if parse_spec.get("hasHeaderRow"):
            translated["findColumnsFromHeader"] = True
        return translated
    if kind == "avro_stream":
        if parse_spec.get("format", "avro") != "avro":
            raise SpecError.single(
                f"{path}.parseSpec.format", "an avro_stream parser takes an avro parseSpec"
            )
        decoder = parser.get("avroBytesDecoder")
        if not isinstance(decoder, dict):
            raise SpecError.single(f"{path}.avroBytesDecoder", "is required")
        translated = {"type": "avro_stream", "avroBytesDecoder": decoder}
        return {**translated, **({"flattenSpec": flatten} if flatten is not None else {})}
    if kind == "protobuf":
        decoder = parser.get("protoBytesDecoder")
        if parser.get("descriptor") is not None or parser.get("protoMessageType") is not None:
            # the older style: it wins over protoBytesDecoder, as in Druid
            decoder = {"type": "file", "descriptor": parser.get("descriptor")}
            if parser.get("protoMessageType") is not None:
                decoder["protoMessageType"] = parser["protoMessageType"]
        if not isinstance(decoder, dict):
            raise SpecError.single(
                f"{path}.protoBytesDecoder", "is required (or descriptor and protoMessageType)"
            )
        translated = {"type": "protobuf", "protoBytesDecoder": decoder}
        return {**translated, **({"flattenSpec": flatten} if flatten is not None else {})}
    raise SpecError.single(
        f"{path}.type",
        f"parser '{kind}' is not read by a Kafka supervisor; use string, avro_stream or protobuf",
    )


def translate(data_schema: Any, io_config: Any, prefix: str = "") -> tuple[Any, Any]:
    """(dataSchema, ioConfig) with a legacy parser read as an inputFormat (copies; as given
    when there is no parser). A parser beside an inputFormat must stand for that one (a spec
    read back and sent again has both)."""
    if not isinstance(data_schema, dict) or not isinstance(io_config, dict):
        return data_schema, io_config
    parser = data_schema.get("parser")
    if parser is None:
        return data_schema, io_config
    path = f"{prefix}dataSchema.parser"
    if not isinstance(parser, dict):
        raise SpecError.single(path, "must be an object")
    translated = input_format_of(parser, path)
    given = io_config.get("inputFormat")
    if given is not None and not _same(InputFormat, given, translated):
        raise SpecError.single(
            path,
            "and ioConfig.inputFormat are both given and differ; give one (inputFormat: "
            "the parser is deprecated)",
        )
    data_schema, io_config = copy.deepcopy(data_schema), copy.deepcopy(io_config)
    for key in ("timestampSpec", "dimensionsSpec"):  # older versions read them back as null
        if key in data_schema and data_schema[key] is None:
            del data_schema[key]
    io_config["inputFormat"] = translated
    parse_spec = parser["parseSpec"]
    for key in ("timestampSpec", "dimensionsSpec"):
        if key not in parse_spec:
            continue
        model = TimestampSpec if key == "timestampSpec" else DimensionsSpec
        given_here = data_schema.get(key)
        if key == "dimensionsSpec" and isinstance(given_here, dict):
            given_here = _without_derived(given_here, parse_spec, data_schema)
        same = _same_dimensions if key == "dimensionsSpec" else _same
        if key in data_schema and not same(model, given_here, parse_spec[key]):
            raise SpecError.single(
                f"{prefix}dataSchema.{key}",
                f"differs from the parser's parseSpec.{key}; give it in one place",
            )
        data_schema[key] = parse_spec[key]
    return data_schema, io_config


def _without_derived(
    dims: dict[str, Any], parse_spec: dict[str, Any], data_schema: dict[str, Any]
) -> dict[str, Any]:
    """A dimensionsSpec as read back, without the exclusions Druid added to it
    (`derived_exclusions`): a spec read back and sent again is the same as its parser's."""
    timestamp = parse_spec.get("timestampSpec") or data_schema.get("timestampSpec") or {}
    column = timestamp.get("column", "timestamp") if isinstance(timestamp, dict) else "timestamp"
    added = set(derived_exclusions(column, data_schema.get("metricsSpec") or []))
    own = parse_spec.get("dimensionsSpec") or {}
    kept = set(own.get("dimensionExclusions") or []) if isinstance(own, dict) else set()
    exclusions = dims.get("dimensionExclusions")
    if not isinstance(exclusions, list):
        return dims
    return {
        **dims,
        "dimensionExclusions": [e for e in exclusions if e not in added or e in kept],
    }


def _written(dimension: Any) -> Any:
    """A dimension as Druid writes it (a value no dimension could be: as it is)."""
    valid = isinstance(dimension, str) or (isinstance(dimension, dict) and "name" in dimension)
    return written_dimension(dimension) if valid else dimension


def _same_dimensions(model: type[DruidModel], one: Any, other: Any) -> bool:
    """Two dimensionsSpecs the same as Druid writes them (a read-back writes every dimension
    out in full)."""
    if not isinstance(one, dict) or not isinstance(other, dict):
        return _same(model, one, other)
    dims = [_written(d) for d in one.get("dimensions") or []]
    if dims != [_written(d) for d in other.get("dimensions") or []]:
        return False
    rest = ("dimensions",)
    return _same(
        model,
        {k: v for k, v in one.items() if k not in rest},
        {k: v for k, v in other.items() if k not in rest},
    )


def _same(model: type[DruidModel], one: Any, other: Any) -> bool:
    """Whether two sections are the same once normalized (a stored spec has every default
    filled in); a section that does not validate is left to the spec's own validation."""
    try:
        return model.model_validate(one).to_json() == model.model_validate(other).to_json()
    except (ValidationError, ValueError, TypeError):
        return bool(one == other)


def warning(parser: dict[str, Any], input_format: dict[str, Any] | None) -> str:
    """What the status says of a spec with a legacy parser."""
    return (
        f"dataSchema.parser (type {parser.get('type', 'string')}) is deprecated in Druid; "
        f"it is read as ioConfig.inputFormat of type {(input_format or {}).get('type')}"
    )
