"""Time, injected wherever it matters so tests can move it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def druid_timestamp(moment: datetime) -> str:
    """Druid's rendering of an instant: ISO-8601 in UTC with milliseconds and a Z."""
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )
