"""JSON values (as orjson gives them) read as the Spark pipeline (tasks/rows/pipeline.py) reads
them, for the Python-worker batch (tasks/reading/worker_batch.py): timestamps to epoch millis, and
dimension and metric values to text, long or double; GiveUp where that cannot be promised."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

INT64 = (-(2**63), 2**63 - 1)
EXACT_DOUBLE = 2**53  # integers a double holds exactly


class GiveUp(Exception):
    """A value this path cannot promise to read as the Spark pipeline does."""


_ISO = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?(Z|[+-]\d{2}:\d{2})?"
)
_DIGITS = re.compile(r"-?\d{1,18}")
_DAYS_BEFORE_MONTH = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


def _days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 (proleptic Gregorian), for a date known to be valid."""
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= month <= 12:
        raise GiveUp("month")
    length = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]
    if not 1 <= day <= length:
        raise GiveUp("day")
    y = year - 1
    before = y * 365 + y // 4 - y // 100 + y // 400
    return before + _DAYS_BEFORE_MONTH[month - 1] + (month > 2 and leap) + day - 1 - 719162


def iso_millis(text: str) -> int:
    """Epoch millis of a canonical ISO-8601 date-time (UTC when no offset), as Spark's cast to
    timestamp reads it; GiveUp for any other form."""
    match = _ISO.fullmatch(text)
    if match is None:
        raise GiveUp(f"timestamp '{text[:64]}' is not in the canonical ISO form")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    if year == "0000" or int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        raise GiveUp(f"timestamp '{text}' is out of range")
    seconds = _days(int(year), int(month), int(day)) * 86400
    seconds += int(hour) * 3600 + int(minute) * 60 + int(second)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "+" else 1
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 18 or minutes > 59:
            raise GiveUp(f"timestamp '{text}' has an offset out of range")
        seconds += sign * (hours * 3600 + minutes * 60)
    return seconds * 1000 + (int(fraction[:3].ljust(3, "0")) if fraction else 0)


def _number_millis(value: Any, unit: int) -> int:
    if type(value) is int and abs(value) * unit < EXACT_DOUBLE:
        return value * unit
    if type(value) is str and _DIGITS.fullmatch(value) and abs(int(value)) * unit < EXACT_DOUBLE:
        return int(value) * unit
    raise GiveUp(f"timestamp {value!r} is not a whole number")


def time_reader(time_format: str) -> Callable[[Any], int]:
    """value (not None) -> epoch millis, or GiveUp."""
    if time_format in ("millis", "posix"):
        unit = 1 if time_format == "millis" else 1000
        return lambda value: _number_millis(value, unit)
    cache: dict[str, int] = {}

    def iso(value: Any) -> int:
        if type(value) is not str:
            raise GiveUp(f"timestamp {value!r} is not text")
        millis = cache.get(value)
        if millis is None:
            millis = iso_millis(value)
            if len(cache) < 100_000:
                cache[value] = millis
        return millis

    if time_format == "iso":
        return iso

    def auto(value: Any) -> int:
        if type(value) is int or (type(value) is str and _DIGITS.fullmatch(value)):
            return _number_millis(value, 1)
        return iso(value)

    return auto


def _text(value: Any) -> str | None:
    """A JSON value as the Spark pipeline's map<string,string> parse gives it."""
    kind = type(value)
    if kind is str or value is None:
        return value  # type: ignore[no-any-return]
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    raise GiveUp(f"a {kind.__name__} value where text is read")


def _long(value: Any) -> int | None:
    kind = type(value)
    if value is None:
        return None
    if kind is int and INT64[0] <= value <= INT64[1]:
        return value  # type: ignore[no-any-return]
    if kind is str and _DIGITS.fullmatch(value):
        return int(value)
    raise GiveUp(f"{value!r} where a long is read")


def _double(value: Any) -> float | None:
    kind = type(value)
    if value is None:
        return None
    if kind is float or (kind is int and abs(value) < EXACT_DOUBLE):
        return float(value)
    raise GiveUp(f"{value!r} where a double is read")


CONVERT = {"string": _text, "int64": _long, "float64": _double}
