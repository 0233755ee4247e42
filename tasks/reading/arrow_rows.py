"""The Python-worker batch's fast path (tasks/reading/worker_batch.py): a chunk of JSON values
parsed, timed and typed by Arrow's JSON reader and compute kernels, in place of orjson and a
Python loop over every record and field. Per record the loop costs a few microseconds; the
reader and kernels a fraction of that.

The loop's judgement is the contract (it reads as the Spark SQL engine reads). So the fast
path reads a chunk only when the loop would read every record of it the same way, and declines
it (None) at the first doubt, for the loop to read:

- only string and long fields, and a timestamp in `iso`, `millis` or `posix` (Arrow turns a
  large integer into a double silently where the loop gives up);
- every value a UTF-8 JSON object on one line, with no `\\u` escape (a lone surrogate) and no
  NaN or Infinity (which Arrow's reader takes in fields it skips and orjson refuses);
- the reader's own refusals: a field twice in a record (the loop reads the last), a string or
  number where the other is declared, a long out of range or with a fraction, bad JSON;
- timestamps: the loop's canonical ISO form (ASCII digits; `\\d` in the loop's regex takes
  other digits too) with valid fields, or whole numbers a double holds exactly.

A record with no timestamp is unparseable on both paths: the fast path gives its index back
for the loop's sampling.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from tasks.rows.json_values import _DAYS_BEFORE_MONTH, EXACT_DOUBLE

_TYPES = ("string", "int64")
# the loop's canonical ISO form (tasks/rows/json_values.py _ISO), anchored, ASCII digits
_ISO = (
    r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})T(?P<hour>\d{2}):(?P<minute>\d{2}):"
    r"(?P<second>\d{2})(?:\.(?P<fraction>\d{1,6}))?(?P<zone>Z|[+-]\d{2}:\d{2})?$"
)
_DECLINE = r"[\n\r]|\\u|NaN|Infinity"  # values the reader would read otherwise than orjson
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@dataclass(frozen=True)
class ArrowPlan:
    options: Any  # pyarrow.json.ParseOptions
    time_column: str
    unit: int | None  # None: ISO text; else millis per number (1 millis, 1000 posix)
    fields: tuple[str, ...]  # the loop's field order: dimensions, then metric inputs


@dataclass(frozen=True)
class Chunk:
    columns: list[Any]  # the loop's order: epoch millis (before query granularity), fields...
    untimed: list[int]  # indexes of records without a timestamp


def arrow_plan(time_column: str, time_format: str, fields: list[tuple[str, str]]) -> Any:
    """The fast path's plan for these (name, Arrow type) fields, or None where it cannot
    promise the loop's reading."""
    import pyarrow as pa
    import pyarrow.json as pj

    units = {"iso": None, "millis": 1, "posix": 1000}
    if time_format not in units or any(kind not in _TYPES for _, kind in fields):
        return None
    unit = units[time_format]
    declared: dict[str, str] = {time_column: "string" if unit is None else "int64"}
    for name, kind in fields:
        if declared.setdefault(name, kind) != kind:
            return None
    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in declared.items()])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    return ArrowPlan(options, time_column, unit, tuple(name for name, _ in fields))


def read_chunk(plan: ArrowPlan, values: Any) -> Chunk | None:
    """A chunk of Kafka values (an Arrow binary array) as the loop would read it, or None."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    if len(values) == 0 or values.null_count:
        return None
    try:
        text = values.cast(pa.string())  # UTF-8, or ArrowInvalid
    except pa.ArrowInvalid:
        return None
    objects = pc.starts_with(pc.utf8_ltrim(text, " "), "{")
    if not pc.all(objects).as_py() or pc.any(pc.match_substring_regex(text, _DECLINE)).as_py():
        return None
    body = io.BytesIO(b"\n".join(values.to_pylist()))
    try:
        table = pj.read_json(body, pj.ReadOptions(use_threads=False), plan.options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(values):
        return None
    stamps = table.column(plan.time_column).combine_chunks()
    timed = pc.is_valid(stamps)
    millis = _millis(plan, stamps.filter(timed))
    if millis is None:
        return None
    untimed = pc.indices_nonzero(pc.invert(timed)).to_pylist()
    columns = [millis, *(table.column(name).filter(timed) for name in plan.fields)]
    return Chunk(columns, untimed)


def _millis(plan: ArrowPlan, stamps: Any) -> Any:
    """Epoch millis of timestamps with no nulls (a numpy int64 array), or None."""
    import numpy as np

    if plan.unit is None:
        return iso_millis(stamps)
    numbers = stamps.to_numpy()
    limit = (EXACT_DOUBLE - 1) // plan.unit  # |value| * unit < 2**53, as the loop checks
    if ((numbers > limit) | (numbers < -limit)).any():
        return None
    return numbers.astype(np.int64) * plan.unit


def iso_millis(stamps: Any) -> Any:
    """Epoch millis of ISO texts (a string array without nulls) as json_values.iso_millis reads
    each, as a numpy int64 array; None if any is not one it reads."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = pc.extract_regex(stamps, _ISO)
    if parts.null_count:
        return None

    def number(name: str) -> Any:
        return pc.cast(parts.field(name), pa.int64()).to_numpy()

    year, month, day = number("year"), number("month"), number("day")
    hour, minute, second = number("hour"), number("minute"), number("second")
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    if ((year == 0) | (hour > 23) | (minute > 59) | (second > 59)).any():
        return None
    if ((month < 1) | (month > 12)).any():
        return None
    length = np.asarray(_DAYS_IN_MONTH)[month - 1] + ((month == 2) & leap)
    if ((day < 1) | (day > length)).any():
        return None
    y = year - 1
    days = y * 365 + y // 4 - y // 100 + y // 400
    days += np.asarray(_DAYS_BEFORE_MONTH)[month - 1] + ((month > 2) & leap) + day - 1 - 719162
    seconds = days * 86400 + hour * 3600 + minute * 60 + second
    offset = _zone_seconds(parts.field("zone"))
    if offset is None:
        return None
    fraction = pc.utf8_rpad(pc.utf8_slice_codeunits(parts.field("fraction"), 0, 3), 3, "0")
    return (seconds + offset) * 1000 + pc.cast(fraction, pa.int64()).to_numpy()


def _zone_seconds(zones: Any) -> Any:
    """Seconds to add for each zone text ("" and "Z" are UTC, else ±HH:MM), or None for an
    offset the loop refuses (hours over 18, minutes over 59)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    named = pc.greater(pc.utf8_length(zones), 1)
    if not pc.any(named).as_py():
        return np.zeros(len(zones), np.int64)
    padded = pc.if_else(named, zones, "+00:00")
    hours = pc.cast(pc.utf8_slice_codeunits(padded, 1, 3), pa.int64()).to_numpy()
    minutes = pc.cast(pc.utf8_slice_codeunits(padded, 4, 6), pa.int64()).to_numpy()
    if ((hours > 18) | (minutes > 59)).any():
        return None
    ahead = pc.starts_with(padded, "+").to_numpy(zero_copy_only=False)
    return np.where(ahead, -1, 1) * (hours * 3600 + minutes * 60)
