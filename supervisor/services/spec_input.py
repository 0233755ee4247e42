"""What users send about supervisors, checked: a submitted spec (validated once per body,
remembered by its canonical JSON), what an update may not change, and a resetOffsets body.
Every problem is a 400 naming its field."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from supervisor.lru import CACHE_BYTES, Lru
from supervisor.schemas.spec import parse_supervisor_spec
from tasks.partitions import PartitionKey, parse_key, split_key
from tasks.spec.errors import FieldError, SpecError
from tasks.support import context_problems, unsupported


def check_update(new: dict[str, Any], old: dict[str, Any]) -> None:
    """Druid's validateSpecUpdateTo: the stream of a supervisor never changes."""
    new_io, old_io = new["spec"]["ioConfig"], old["spec"]["ioConfig"]
    for key in ("topic", "topicPattern"):
        if (key in new_io) != (key in old_io):
            raise SpecError.single(
                "spec.ioConfig.topic",
                "cannot switch between topic and topicPattern on update; "
                "terminate the supervisor and submit a new one",
            )
        if key in new_io and new_io[key] != old_io[key]:
            raise SpecError.single(
                f"spec.ioConfig.{key}",
                f"cannot change from '{old_io[key]}' to '{new_io[key]}' on update; "
                "terminate the supervisor and submit a new one",
            )


@dataclass(frozen=True)
class Checked:
    """A submitted spec that passed validation: its id, datasource, suspension and normalized
    payload (JSON text, with Druid's defaults and its id filled in)."""

    supervisor_id: str
    datasource: str
    suspended: bool
    payload: str


CHECKED_KEPT = 1024


checked_specs: Lru[str, Checked] = Lru(CHECKED_KEPT, CACHE_BYTES, name="checked specs")


def check_spec(raw: Any) -> Checked:
    """Validate a submitted spec (every problem a 400 naming its field). Validation is a pure
    function of the body and costs milliseconds, and tools resubmit the same spec over and
    over (skipRestartIfUnmodified): bodies that passed are remembered by their canonical JSON."""
    try:
        key: str | None = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        key = None
    hit = checked_specs.get(key) if key is not None else None
    if hit is not None:
        return hit
    parsed = parse_supervisor_spec(raw)
    problems = unsupported(parsed.spec.dataSchema, parsed.spec.ioConfig.inputFormat, "spec.")
    problems += context_problems(parsed.context, "context.")
    scaler = parsed.spec.ioConfig.autoScalerConfig
    if (
        scaler is not None
        and scaler.enableTaskAutoScaler
        and scaler.autoScalerStrategy != "lagBased"
    ):
        # refused when submitted; a version stored before is read (and scaled) as lagBased
        problems.append(
            FieldError(
                "spec.ioConfig.autoScalerConfig.autoScalerStrategy",
                f"'{scaler.autoScalerStrategy}' is not supported yet; use lagBased",
            )
        )
    if problems:
        raise SpecError(problems)
    payload = parsed.to_json()
    payload["id"] = parsed.supervisor_id
    checked = Checked(
        parsed.supervisor_id, parsed.datasource, parsed.suspended, json.dumps(payload)
    )
    if key is not None:
        checked_specs.put(key, checked, len(key) + len(checked.payload))
    return checked


def reset_offsets_body(body: Any, stream: str, pattern: bool) -> dict[str, int]:
    """Druid's body: {"type": "kafka", "partitions": {"type": "end", "stream": topic,
    "partitionOffsetMap": {"0": 100}}} (a topicPattern supervisor: its pattern, and keys
    "topic:partition"); every problem is a 400 naming its field."""
    if not isinstance(body, dict):
        raise SpecError.single("", "the body must be a JSON object")
    if body.get("type") != "kafka":
        raise SpecError.single("type", "must be 'kafka'")
    partitions = body.get("partitions")
    if not isinstance(partitions, dict):
        raise SpecError.single("partitions", "is required")
    if partitions.get("stream") != stream:
        kind = "topicPattern" if pattern else "topic"
        raise SpecError.single("partitions.stream", f"must be the supervisor's {kind} '{stream}'")
    offsets = partitions.get("partitionOffsetMap")
    if not isinstance(offsets, dict) or not offsets:
        raise SpecError.single("partitions.partitionOffsetMap", "must map partitions to offsets")
    result: dict[str, int] = {}
    for partition, offset in offsets.items():
        field = f"partitions.partitionOffsetMap.{partition}"
        reason = _partition_problem(str(partition), stream, pattern)
        if reason:
            raise SpecError.single(field, reason)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise SpecError.single(field, "offsets are non-negative integers")
        result[str(parse_key(partition))] = offset
    return result


def _partition_problem(text: str, stream: str, pattern: bool) -> str | None:
    try:
        key: PartitionKey | None = parse_key(text)
    except ValueError:
        key = None
    if not pattern:
        return None if isinstance(key, int) else "partitions are non-negative integers"
    if not isinstance(key, str):
        return "partitions of a topicPattern supervisor are named 'topic:partition'"
    topic = split_key(key, stream)[0]
    if not re.fullmatch(stream, topic):
        return f"topic '{topic}' does not match the topicPattern '{stream}'"
    return None
