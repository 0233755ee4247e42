"""The fast batch's pure value readers against Python's own calendar."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from tasks import granularity
from tasks.rows.json_values import GiveUp, iso_millis, time_reader

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def millis(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(milliseconds=1)


def test_iso_millis_agrees_with_datetime_over_many_dates() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        moment = EPOCH + timedelta(milliseconds=rng.randrange(-(10**13), 10**13))
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        assert iso_millis(text) == millis(moment), text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T08:00:00Z", datetime(2026, 11, 22, 8, tzinfo=UTC)),
        ("2026-11-22T08:00:00", datetime(2026, 11, 22, 8, tzinfo=UTC)),
        ("2026-11-22T09:30:00+01:30", datetime(2026, 11, 22, 8, tzinfo=UTC)),
        ("2026-11-22T06:00:00-02:00", datetime(2026, 11, 22, 8, tzinfo=UTC)),
        ("2024-02-29T00:00:00.123456Z", datetime(2024, 2, 29, 0, 0, 0, 123000, tzinfo=UTC)),
        ("1969-12-31T23:59:59.999Z", datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
    ],
)
def test_iso_millis_forms(text: str, expected: datetime) -> None:
    assert iso_millis(text) == millis(expected)


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-22 08:00:00",
        "2026-11-22",
        "2025-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-11-22T24:00:00Z",
        "2026-11-22T08:00:00.1234567Z",
        "2026-11-22T08:00:00+0100",
        " 2026-11-22T08:00:00Z",
    ],
)
def test_other_forms_are_left_to_spark(text: str) -> None:
    with pytest.raises(GiveUp):
        iso_millis(text)


def test_numbers_by_format() -> None:
    assert time_reader("millis")(1700000000123) == 1700000000123
    assert time_reader("millis")("1700000000123") == 1700000000123
    assert time_reader("posix")(1700000000) == 1700000000000
    assert time_reader("auto")(5) == 5
    assert time_reader("auto")("1970-01-01T00:00:01Z") == 1000
    for value in (1.5, True, "1.5", 2**60):
        with pytest.raises(GiveUp):
            time_reader("millis")(value)
    with pytest.raises(GiveUp):
        time_reader("iso")(1700000000000)


@pytest.mark.parametrize("name", ["hour", "day", "week", "month", "quarter", "year"])
def test_bucket_start_holds_the_moment_and_ends_at_the_next(name: str) -> None:
    rng = random.Random(name)
    for _ in range(300):
        ms = rng.randrange(-(10**12), 3 * 10**12)
        start = granularity.bucket_start(ms, name)
        assert start <= ms < granularity.bucket_end(start, name)
        assert granularity.bucket_start(start, name) == start
    monday = millis(datetime(2026, 11, 23, tzinfo=UTC))
    assert granularity.bucket_start(monday + 5 * 86_400_000, "week") == monday


def test_a_worker_result_row_reads_back_as_its_model() -> None:
    from tasks.reading.worker_batch import RESULT_FIELDS, ResultKind, WorkerResult, _result

    assert [f for f, _ in RESULT_FIELDS] == list(WorkerResult.__dataclass_fields__)
    row = {f: None for f, _ in RESULT_FIELDS} | _result(ResultKind.STATS, processed=3)
    read = WorkerResult.of(row)
    assert (read.kind, read.processed, read.unparseable) == (ResultKind.STATS, 3, 0)
    sample = {f: None for f, _ in RESULT_FIELDS} | _result(
        ResultKind.SAMPLE, partition=1, offset=7, input="x", message="bad"
    )
    assert WorkerResult.of(sample).sample() == {
        "partition": 1,
        "offset": 7,
        "input": "x",
        "message": "bad",
    }
