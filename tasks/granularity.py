"""Granularities as time buckets: a Spark floor expression and the bucket's end in Python."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tasks.spec.data_schema import GRANULARITIES

CALENDAR = {"week", "month", "quarter", "year"}
# Fixed-length buckets (second ... day) are floored arithmetically; calendar ones with date_trunc.
FIXED_MS = {
    name: millis
    for name, millis in GRANULARITIES.items()
    if name not in CALENDAR and name not in ("none", "all")
}
SUPPORTED_QUERY = {"none", *FIXED_MS, *CALENDAR}
SUPPORTED_SEGMENT = {*FIXED_MS, *CALENDAR}
# Druid's standard granularities by the period each stands for (its GranularityType): a
# period granularity in UTC without origin whose period is one of these is that granularity.
STANDARD_PERIODS = {
    "PT1S": "second",
    "PT1M": "minute",
    "PT2M": "two_minute",
    "PT3M": "three_minute",
    "PT4M": "four_minute",
    "PT5M": "five_minute",
    "PT10M": "ten_minute",
    "PT15M": "fifteen_minute",
    "PT30M": "thirty_minute",
    "PT1H": "hour",
    "PT6H": "six_hour",
    "PT8H": "eight_hour",
    "P1D": "day",
    "P1W": "week",
    "P1M": "month",
    "P3M": "quarter",
    "P1Y": "year",
}


def standard_period(granularity: dict[str, Any]) -> str | None:
    """The standard granularity a {"type": "period"} one is, or None."""
    if str(granularity.get("type", "")).lower() != "period":
        return None
    zone, origin = granularity.get("timeZone"), granularity.get("origin")
    if zone not in (None, "UTC", "Etc/UTC") or origin is not None:
        return None
    return STANDARD_PERIODS.get(str(granularity.get("period", "")).strip().upper())


def name_of(granularity: str | dict[str, Any]) -> str | None:
    """The simple name of a granularity, or None for period/duration objects."""
    if isinstance(granularity, str):
        return granularity.strip().lower()
    kind = str(granularity.get("type", "")).lower()
    if kind == "period":
        kind = standard_period(granularity) or kind
    return kind if kind in SUPPORTED_QUERY or kind == "all" else None


def floor_ms(column: Any, granularity: str) -> Any:
    """Spark expression: epoch-millis `column` floored to the granularity's bucket start."""
    from pyspark.sql import functions as F

    if granularity == "none":
        return column
    if granularity in FIXED_MS:
        size = FIXED_MS[granularity]
        return F.floor(column / F.lit(size)).cast("long") * F.lit(size)
    truncated = F.date_trunc(granularity, F.timestamp_millis(column))
    return F.unix_millis(truncated)


def bucket_start(ms: int, granularity: str) -> int:
    """In Python: the start of the bucket holding epoch millis `ms` (as floor_ms in Spark;
    weeks start on Monday, as date_trunc's)."""
    if granularity in FIXED_MS:
        return ms // FIXED_MS[granularity] * FIXED_MS[granularity]
    moment = datetime.fromtimestamp(0, UTC) + timedelta(milliseconds=ms)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if granularity == "week":
        start = day - timedelta(days=day.weekday())
    elif granularity == "month":
        start = day.replace(day=1)
    elif granularity == "quarter":
        start = day.replace(day=1, month=(day.month - 1) // 3 * 3 + 1)
    else:
        start = day.replace(day=1, month=1)
    return int((start - datetime.fromtimestamp(0, UTC)).total_seconds() * 1000)


def bucket_end(start_ms: int, granularity: str) -> int:
    if granularity in FIXED_MS:
        return start_ms + FIXED_MS[granularity]
    start = datetime.fromtimestamp(start_ms / 1000, UTC)
    if granularity == "week":
        end = start + timedelta(days=7)
    else:
        months = {"month": 1, "quarter": 3, "year": 12}[granularity]
        month_index = start.month - 1 + months
        end = start.replace(year=start.year + month_index // 12, month=month_index % 12 + 1)
    return int(end.timestamp() * 1000)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
