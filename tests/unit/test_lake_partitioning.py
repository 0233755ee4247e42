"""Which Iceberg transform of __time holds a segment interval of each Druid granularity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from supervisor.lake.partitioning import transform_for
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


def test_segment_files_of_one_schema_share_one_footer_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each segment file's schema metadata names its own segment: two files of the same
    columns make one statistics plan between them (keyed by the metadata too, every file made
    its own and the cache grew with every publish), and their data files are right."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.catalog import Catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import assign_fresh_schema_ids
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.transforms import DayTransform

    from supervisor.lake import tables

    rows = pa.table(
        {
            "__time": pa.array([_micros(MOMENT), _micros(MOMENT) + 1], pa.timestamp("us", "UTC")),
            "word": ["a", "b"],
        }
    )
    schema = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(rows.schema))
    spec = PartitionSpec(
        PartitionField(schema.find_field("__time").field_id, 1000, DayTransform(), "d")
    )
    metadata = new_table_metadata(schema, spec, UNSORTED_SORT_ORDER, str(tmp_path), {})
    made = []
    real = tables.compute_statistics_plan
    monkeypatch.setattr(tables, "compute_statistics_plan", lambda *a: made.append(a) or real(*a))
    files = []
    for n in range(3):
        path = tmp_path / f"{n}.parquet"
        pq.write_table(
            rows.replace_schema_metadata({b"sluicegate.segmentId": f"s{n}".encode()}), path
        )
        footer = pq.read_metadata(path)
        files.append(tables.data_file(metadata, str(path), path.stat().st_size, footer))
    assert len(made) == 1
    assert [f.record_count for f in files] == [2, 2, 2]
    assert {f.partition[0] for f in files} == {
        DayTransform().transform(schema.find_field("__time").field_type)(_micros(MOMENT))
    }
