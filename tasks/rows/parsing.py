"""Kafka records → a map of string fields, per the inputFormat (json, csv, tsv, delimited,
kafka, and the binary avro_stream, avro_ocf and protobuf, decoded to JSON first: `decoded`).

A record that cannot be parsed gets a null map; the pipeline counts and samples it.
"""

from __future__ import annotations

import warnings
from typing import Any

from tasks import binary_formats
from tasks.rows import flatten
from tasks.rows.decoding import BINARY_FORMATS
from tasks.spec.io_config import InputFormat

SUPPORTED = {"json", "csv", "tsv", "delimited", "kafka", *BINARY_FORMATS}
SCALAR_PANDAS_UDF = 200  # PySpark's PythonEvalType.SQL_SCALAR_PANDAS_UDF
DECODED = "array<struct<json:string,error:string>>"  # a Kafka record's records as JSON


def check(input_format: InputFormat, path: str) -> list[tuple[str, str]]:
    extra = input_format.model_extra or {}
    if input_format.type not in SUPPORTED:
        return [
            (
                f"{path}.type",
                f"input format '{input_format.type}' is not supported yet; "
                "supported: " + ", ".join(sorted(SUPPORTED)),
            )
        ]
    problems: list[tuple[str, str]] = []
    if input_format.type == "json" or input_format.type in BINARY_FORMATS:
        problems += flatten.parse(extra.get("flattenSpec"), f"{path}.flattenSpec")[1]
    if input_format.type in BINARY_FORMATS:
        problems += binary_formats.problems(input_format, path)
    if input_format.type in ("csv", "tsv", "delimited") and not extra.get("columns"):
        problems.append((f"{path}.columns", "streaming needs the columns listed"))
    if input_format.type == "kafka":
        value_format = InputFormat.model_validate(extra.get("valueFormat", {}))
        if value_format.type == "kafka":
            problems.append((f"{path}.valueFormat.type", "cannot itself be kafka"))
        else:
            problems += check(value_format, f"{path}.valueFormat")
    return problems


def _text(column: Any) -> Any:
    return column.cast("string")


def _delimited(value: Any, input_format: InputFormat) -> Any:
    from pyspark.sql import functions as F

    extra = input_format.model_extra or {}
    delimiter = {"csv": ",", "tsv": "\t"}.get(input_format.type, extra.get("delimiter", "\t"))
    columns: list[str] = list(extra["columns"])
    schema = ", ".join(f"`{name}` STRING" for name in columns)
    options = {"sep": delimiter, "mode": "PERMISSIVE"}
    parsed = F.from_csv(value, schema, options)
    fields = F.map_from_arrays(
        F.array(*[F.lit(name) for name in columns]),
        F.array(*[parsed[name] for name in columns]),
    )
    all_null = F.lit(True)
    for name in columns:
        all_null = all_null & parsed[name].isNull()
    return F.when(value.isNull() | all_null, F.lit(None)).otherwise(fields)


def value_fields(value: Any, input_format: InputFormat) -> Any:
    """Spark column: map<string,string> of the record's fields, null when unparseable."""

    if input_format.type == "json" or input_format.type in BINARY_FORMATS:  # (decoded)
        return json_fields(_text(value), (input_format.model_extra or {}).get("flattenSpec"))
    return _delimited(_text(value), input_format)


def binary(input_format: InputFormat) -> InputFormat | None:
    """The binary format records are decoded from (a kafka format's valueFormat), if any."""
    if input_format.type == "kafka":
        value_format = InputFormat.model_validate((input_format.model_extra or {})["valueFormat"])
        return value_format if value_format.type in BINARY_FORMATS else None
    return input_format if input_format.type in BINARY_FORMATS else None


def decoded(frame: Any, input_format: InputFormat) -> Any:
    """Kafka source rows of a binary format → a row per record each holds, its value the
    record as JSON text (null when it cannot be decoded: `__decode_error` says why), with the
    Kafka record's size (`__size`) and bytes in base64 (`__encoded`, for the samples). An
    object container file holds any number of records; the other formats one."""
    import json

    from pyspark.sql import functions as F

    spec = json.dumps((binary(input_format) or input_format).to_json(), sort_keys=True)

    def decode_values(values: Any) -> Any:  # a pandas Series of bytes, in a Python worker
        from tasks.rows import decoders

        made = decoders.decoder(json.loads(spec))
        return values.map(
            lambda v: [{"json": j, "error": e} for j, e in decoders.json_texts(made, v)]
        )

    pandas_udf: Any = F.pandas_udf  # type: ignore[attr-defined]
    with warnings.catch_warnings():  # the kind given, not read off type hints (deprecated)
        warnings.simplefilter("ignore")
        decode = pandas_udf(decode_values, DECODED, SCALAR_PANDAS_UDF)

    size = F.coalesce(F.length("value"), F.lit(0))
    return (
        frame.select("*", F.posexplode(decode(F.col("value"))).alias("__at", "__record"))
        .withColumn("__size", F.when(F.col("__at") == 0, size).otherwise(F.lit(0)))  # once
        .withColumn("__encoded", F.base64("value"))
        .withColumn("value", F.col("__record.json"))
        .withColumn("__decode_error", F.col("__record.error"))
        .drop("__record", "__at")
    )


def json_fields(text: Any, flatten_spec: Any = None) -> Any:
    """Spark column: the fields of a JSON object's text per its flattenSpec (None: its root
    fields), null when it is not a JSON object."""
    from pyspark.sql import functions as F

    parsed = F.from_json(text, "map<string,string>", {"mode": "PERMISSIVE"})
    # from_json keeps a repeated key twice and a lookup finds the first; rebuilt under the
    # session's LAST_WIN policy the map keeps the last value, as Druid's Jackson map does.
    fields = F.map_from_arrays(F.map_keys(parsed), F.map_values(parsed))
    # A JSON value that is not an object (an array, a number) is unparseable too.
    root = F.when(F.ltrim(text).startswith("{"), fields)
    spec, problems = flatten.parse(flatten_spec, "flattenSpec")
    if problems:  # refused at submit: a stored spec never has them
        raise ValueError(f"flattenSpec: {problems}")
    return root if spec is None else flatten.flattened(text, root, spec)


def record_fields(record: Any, input_format: InputFormat) -> Any:
    """The fields of a Kafka source row (value, key, timestamp, headers, topic columns)."""
    from pyspark.sql import functions as F

    if input_format.type != "kafka":
        return value_fields(record["value"], input_format)
    extra = input_format.model_extra or {}
    value_format = InputFormat.model_validate(extra["valueFormat"])
    values = value_fields(record["value"], value_format)
    key_column = extra.get("keyColumnName", "kafka.key")
    time_column = extra.get("timestampColumnName", "kafka.timestamp")
    topic_column = extra.get("topicColumnName", "kafka.topic")
    header_prefix = extra.get("headerColumnPrefix", "kafka.header.")
    added = F.create_map(
        F.lit(key_column),
        _text(record["key"]),
        F.lit(time_column),
        F.unix_millis(record["timestamp"]).cast("string"),
        F.lit(topic_column),
        record["topic"],
    )
    headers = F.map_from_entries(
        F.transform(
            F.coalesce(record["headers"], F.array()),
            lambda h: F.struct(F.concat(F.lit(header_prefix), h["key"]), _text(h["value"])),
        )
    )
    return F.when(values.isNotNull(), F.map_concat(values, added, headers))
