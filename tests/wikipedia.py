"""Druid's wikipedia stream events (the fields its stream integration tests produce) and the
Avro schema and Protobuf message they are written with there, for the format tests."""

from __future__ import annotations

from typing import Any

STRINGS = (
    "timestamp",
    "page",
    "language",
    "user",
    "unpatrolled",
    "newPage",
    "robot",
    "anonymous",
    "namespace",
    "continent",
    "country",
    "region",
    "city",
)
NUMBERS = ("added", "deleted", "delta")
AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "wikipedia",
    "namespace": "org.apache.druid",
    "fields": [
        *({"name": name, "type": "string"} for name in STRINGS),
        *({"name": name, "type": "int"} for name in NUMBERS),
    ],
}
PAGES = ("Gypsy Danger", "Striker Eureka", "Cherno Alpha", "Crimson Typhoon", "Coyote Tango")
CITIES = ("San Francisco", "Sydney", "Moscow", "Hong Kong", "Tokyo")


def event(i: int) -> dict[str, Any]:
    """The i-th event: five pages in turn, in an hour of 2013-08-31."""
    return {
        "timestamp": f"2013-08-31T01:{i // 60 % 60:02d}:{i % 60:02d}Z",
        "page": PAGES[i % 5],
        "language": "en" if i % 3 else "ja",
        "user": f"user{i % 7}",
        "unpatrolled": "true" if i % 2 else "false",
        "newPage": "false",
        "robot": "true" if i % 4 == 0 else "false",
        "anonymous": "false",
        "namespace": "article",
        "continent": "North America",
        "country": "United States",
        "region": "Bay Area",
        "city": CITIES[i % 5],
        "added": i,
        "deleted": i % 10,
        "delta": i - i % 10,
    }


def nested(record: dict[str, Any]) -> dict[str, Any]:
    """The event with its places and counts nested, for a flattenSpec to take apart."""
    flat = dict(record)
    geo = {key: flat.pop(key) for key in ("continent", "country", "region", "city")}
    counts = {key: flat.pop(key) for key in NUMBERS}
    return {**flat, "geo": {"place": geo}, "counts": counts}


NESTED_FLATTEN = {
    "useFieldDiscovery": True,
    "fields": [
        {"type": "path", "name": "continent", "expr": "$.geo.place.continent"},
        {"type": "path", "name": "country", "expr": "$.geo.place.country"},
        {"type": "jq", "name": "region", "expr": ".geo.place.region"},
        {"type": "tree", "name": "city", "nodes": ["geo", "place", "city"]},
        *({"type": "path", "name": n, "expr": f"$.counts.{n}"} for n in NUMBERS),
    ],
}


def descriptor_set() -> bytes:
    """A compiled descriptor (FileDescriptorSet) of Druid's proto2 `Wikipedia` message."""
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name="wikipedia.proto", syntax="proto2")
    message = proto.message_type.add(name="Wikipedia")
    field = descriptor_pb2.FieldDescriptorProto
    for number, name in enumerate(STRINGS + NUMBERS, start=1):
        message.field.add(
            name=name,
            number=number,
            label=field.LABEL_OPTIONAL,
            type=field.TYPE_INT32 if name in NUMBERS else field.TYPE_STRING,
        )
    return descriptor_pb2.FileDescriptorSet(file=[proto]).SerializeToString()


def message_class() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for proto in descriptor_pb2.FileDescriptorSet.FromString(descriptor_set()).file:
        pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("Wikipedia"))
