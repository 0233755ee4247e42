"""Which Iceberg transform of __time holds a segment interval of each Druid granularity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from supervisor.lake.tables import transform_for
from tasks.granularity import bucket_end, bucket_start

MOMENT = int(datetime(2026, 11, 28, 13, 47, 5, tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize(
    ("granularity", "transform"),
    [
        ("second", "hour"),
        ("minute", "hour"),
        ("fifteen_minute", "hour"),
        ("thirty_minute", "hour"),
        ("hour", "hour"),
        ("six_hour", "day"),
        ("eight_hour", "day"),
        ("day", "day"),
        ("week", None),  # a week straddles months: no partition holds it
        ("month", "month"),
        ("quarter", "year"),
        ("year", "year"),
    ],
)
def test_each_granularitys_segments_fit_one_partition(
    granularity: str, transform: str | None
) -> None:
    start = bucket_start(MOMENT, granularity)
    end = bucket_end(start, granularity)
    found = transform_for(_at(start), _at(end))
    assert (None if found is None else str(found)) == transform
    if found is not None:  # the interval's first and last instants share the partition
        first = found.transform(_type())(_micros(start))
        last = found.transform(_type())(_micros(end) - 1)
        assert first == last


def test_a_leap_february_and_a_long_month_are_months() -> None:
    for start, days in (
        (datetime(2028, 2, 1, tzinfo=UTC), 29),
        (datetime(2026, 12, 1, tzinfo=UTC), 31),
    ):
        assert str(transform_for(start, start + timedelta(days=days))) == "month"


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _micros(ms: int) -> int:
    return ms * 1000


def _type() -> object:
    from pyiceberg.types import TimestamptzType

    return TimestamptzType()
