"""Druid's wikipedia stream events on the real broker in every input format a Druid user
brings (flat JSON; nested JSON with a flattenSpec; Avro with an inline schema and with the
real schema registry, and with unions read by extractUnionsByType; Protobuf with a descriptor
file and with the registry, its schema registered as .proto text as Java producers do; a legacy
avro_stream parser) ingest by real tasks to the same rows: per page, the same count and the
same sums of added, deleted and delta. A record of each that cannot be read is counted
unparseable, not a failed task."""

from __future__ import annotations

import io
import json
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from supervisor.db.models import SegmentRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.registry import LocalRegistry
from supervisor.devstack.topics import create_topic, produce
from supervisor.testkit.service import RunningService, db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tests import wikipedia

TASKS = "/druid/indexer/v1"
EVENTS = [wikipedia.event(i) for i in range(300)]
GARBAGE = b"\x00\x00\x00\x00\x07\xff\xfe not a record"
PROTO_TEXT = "\n".join(
    [
        'syntax = "proto2";',
        "message Wikipedia {",
        *(
            f"  optional {'int32' if name in wikipedia.NUMBERS else 'string'} {name} = {n};"
            for n, name in enumerate(wikipedia.STRINGS + wikipedia.NUMBERS, start=1)
        ),
        "}",
    ]
)


@pytest.fixture
def overlord(
    tmp_path: Path, jar_cache: Path, registry: LocalRegistry
) -> Iterator[tuple[RunningService, httpx.Client]]:
    allowed = f"{registry.url}/,{tmp_path}/"
    with overlord_with_tasks(
        tmp_path, jar_cache, "local[2]", allowed_schema_locations=allowed
    ) as running:
        yield running


def avro_body(record: dict[str, Any], schema: dict[str, Any] = wikipedia.AVRO_SCHEMA) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def register(registry: LocalRegistry, subject: str, schema: str, kind: str) -> int:
    answer = httpx.post(
        f"{registry.url}/subjects/{subject}/versions",
        json={"schema": schema, "schemaType": kind},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


def framed(schema_id: int, body: bytes, protobuf: bool = False) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + (b"\x00" if protobuf else b"") + body


def topic_of(kafka: LocalKafka, values: list[bytes]) -> str:
    topic = f"fmt-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 1)
    produce(kafka.bootstrap_servers, topic, [(None, v) for v in [*values, GARBAGE]])
    return topic


def task(
    name: str, topic: str, bootstrap: str, input_format: dict[str, Any] | None, **schema: Any
) -> dict[str, Any]:
    numbers = [{"type": "longSum", "name": n, "fieldName": n} for n in wikipedia.NUMBERS]
    data_schema: dict[str, Any] = {
        "dataSource": name,
        "timestampSpec": {"column": "timestamp", "format": "auto"},
        "dimensionsSpec": {"dimensions": ["page", "language", "user", "city", "country"]},
        "metricsSpec": [{"type": "count", "name": "count"}, *numbers],
        "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "MINUTE"},
        **schema,
    }
    io_config: dict[str, Any] = {
        "type": "kafka",
        "startSequenceNumbers": {
            "type": "start",
            "stream": topic,
            "partitionSequenceNumberMap": {"0": 0},
        },
        "endSequenceNumbers": {
            "type": "end",
            "stream": topic,
            "partitionSequenceNumberMap": {"0": len(EVENTS) + 1},
        },
        "consumerProperties": {"bootstrap.servers": bootstrap},
    }
    if input_format is not None:
        io_config["inputFormat"] = input_format
    return {
        "type": "index_kafka",
        "id": f"task-{name}",
        "dataSchema": data_schema,
        "tuningConfig": {"type": "kafka"},
        "ioConfig": io_config,
    }


def totals(service: RunningService, datasource: str) -> dict[str, tuple[int, ...]]:
    """Per page: rows ingested (the count metric), and the sums of added, deleted, delta."""
    query = select(SegmentRow.path).where(SegmentRow.datasource == datasource)
    per_page: dict[str, list[int]] = {}
    for (path,) in db_rows(service, query):
        for row in pq.read_table(path).to_pylist():
            sums = per_page.setdefault(row["page"], [0, 0, 0, 0])
            for index, name in enumerate(("count", *wikipedia.NUMBERS)):
                sums[index] += row[name]
    return {page: tuple(sums) for page, sums in per_page.items()}


def test_every_format_ingests_to_the_same_rows(
    kafka: LocalKafka,
    registry: LocalRegistry,
    overlord: tuple[RunningService, httpx.Client],
    tmp_path: Path,
) -> None:
    service, api = overlord
    bootstrap = kafka.bootstrap_servers
    message = wikipedia.message_class()
    protos = [message(**e).SerializeToString() for e in EVENTS]
    descriptor = tmp_path / "wikipedia.desc"
    descriptor.write_bytes(wikipedia.descriptor_set())
    avro_topic = topic_of(kafka, [avro_body(e) for e in EVENTS])
    avro_id = register(registry, f"{avro_topic}-value", json.dumps(wikipedia.AVRO_SCHEMA), "AVRO")
    registry_topic = topic_of(kafka, [framed(avro_id, avro_body(e)) for e in EVENTS])
    proto_id = register(registry, f"wiki-{uuid.uuid4().hex[:6]}", PROTO_TEXT, "PROTOBUF")
    inline = {"type": "schema_inline", "schema": wikipedia.AVRO_SCHEMA}
    from_registry = {"type": "schema_registry", "url": registry.url}
    tasks = {
        "flat": task(
            "flat",
            topic_of(kafka, [json.dumps(e).encode() for e in EVENTS]),
            bootstrap,
            {"type": "json"},
        ),
        "nested": task(
            "nested",
            topic_of(kafka, [json.dumps(wikipedia.nested(e)).encode() for e in EVENTS]),
            bootstrap,
            {"type": "json", "flattenSpec": wikipedia.NESTED_FLATTEN},
        ),
        "avro_inline": task(
            "avro_inline",
            avro_topic,
            bootstrap,
            {"type": "avro_stream", "avroBytesDecoder": inline},
        ),
        "avro_registry": task(
            "avro_registry",
            registry_topic,
            bootstrap,
            {"type": "avro_stream", "avroBytesDecoder": from_registry},
        ),
        "proto_file": task(
            "proto_file",
            topic_of(kafka, protos),
            bootstrap,
            {
                "type": "protobuf",
                "protoBytesDecoder": {
                    "type": "file",
                    "descriptor": f"file://{descriptor}",
                    "protoMessageType": "Wikipedia",
                },
            },
        ),
        "proto_registry": task(
            "proto_registry",
            topic_of(kafka, [framed(proto_id, p, protobuf=True) for p in protos]),
            bootstrap,
            {"type": "protobuf", "protoBytesDecoder": from_registry},
        ),
    }
    # the page and the counts as unions of more than one type, read with extractUnionsByType
    # and taken out of their unions by flattenSpec paths
    unions_schema = {
        **wikipedia.AVRO_SCHEMA,
        "fields": [
            {**f, "type": ["null", f["type"], "long" if f["name"] == "page" else "string"]}
            if f["name"] in ("page", *wikipedia.NUMBERS)
            else f
            for f in wikipedia.AVRO_SCHEMA["fields"]
        ],
    }
    tasks["avro_unions"] = task(
        "avro_unions",
        topic_of(kafka, [avro_body(e, unions_schema) for e in EVENTS]),
        bootstrap,
        {
            "type": "avro_stream",
            "avroBytesDecoder": {"type": "schema_inline", "schema": unions_schema},
            "extractUnionsByType": True,
            "flattenSpec": {
                "useFieldDiscovery": True,
                "fields": [
                    {"type": "path", "name": "page", "expr": "$.page.string"},
                    *({"type": "path", "name": n, "expr": f"$.{n}.int"} for n in wikipedia.NUMBERS),
                ],
            },
        },
    )
    # a long-lived Druid spec: the legacy avro_stream parser
    legacy = task("legacy", avro_topic, bootstrap, None)
    schema = legacy["dataSchema"]
    schema["parser"] = {
        "type": "avro_stream",
        "avroBytesDecoder": inline,
        "parseSpec": {
            "format": "avro",
            "timestampSpec": schema.pop("timestampSpec"),
            "dimensionsSpec": schema.pop("dimensionsSpec"),
        },
    }
    tasks["legacy"] = legacy
    for name, body in tasks.items():
        answer = api.post(f"{TASKS}/task", json=body)
        assert answer.status_code == 200, (name, answer.text)

    def finished() -> dict[str, str] | None:
        states = {
            name: api.get(f"{TASKS}/task/task-{name}/status").json()["status"]["status"]
            for name in tasks
        }
        return None if "RUNNING" in states.values() else states

    states = wait_for(finished, 600, "every format's task to finish")
    assert set(states.values()) == {"SUCCESS"}, {
        name: api.get(f"{TASKS}/task/task-{name}/status").json()["status"]["errorMsg"]
        for name in tasks
    }
    expected = totals(service, "flat")
    assert sum(t[0] for t in expected.values()) == len(EVENTS)
    assert expected == {
        page: (
            sum(1 for e in EVENTS if e["page"] == page),
            *(sum(e[n] for e in EVENTS if e["page"] == page) for n in wikipedia.NUMBERS),
        )
        for page in wikipedia.PAGES
    }
    for name in tasks:
        assert totals(service, name) == expected, name
        report = api.get(f"{TASKS}/task/task-{name}/reports").json()
        stats = report["ingestionStatsAndErrors"]["payload"]["rowStats"]["buildSegments"]
        assert (stats["processed"], stats["unparseable"]) == (len(EVENTS), 1), name
    # the nested version's places came through the flattenSpec (a city is a dimension)
    cities = {
        row["city"]
        for (path,) in db_rows(
            service, select(SegmentRow.path).where(SegmentRow.datasource == "nested")
        )
        for row in pq.read_table(path).to_pylist()
    }
    assert cities == set(wikipedia.CITIES)
