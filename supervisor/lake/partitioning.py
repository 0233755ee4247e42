"""How a datasource's table is partitioned: the Iceberg transform of `__time` that holds a
segment interval of each granularity, and the spec made of it (supervisor/lake/tables.py
makes the table's own the ingested granularity's; a compaction into a coarser one adds its
files under their own, lake/rewrite.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Transaction
from pyiceberg.transforms import (
    DayTransform,
    HourTransform,
    MonthTransform,
    Transform,
    YearTransform,
)

TIME = "__time"
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


def transform_for(start: datetime, end: datetime) -> Transform[Any, Any] | None:
    """The finest of Iceberg's time transforms with one partition that holds a segment
    interval of this length (the segment granularity's), None when none does (a week)."""
    span_ms = (end - start).total_seconds() * 1000
    if span_ms <= HOUR_MS:
        return HourTransform()
    if span_ms <= DAY_MS:
        return DayTransform()
    if span_ms <= 7 * DAY_MS:
        return None  # a week straddles months and years
    if span_ms <= 31 * DAY_MS:
        return MonthTransform()
    return YearTransform()  # a quarter, a year


def spec_of(schema: Schema, transform: Transform[Any, Any] | None) -> PartitionSpec:
    if transform is None:
        return PartitionSpec()
    source = schema.find_field(TIME).field_id
    name = f"{TIME}_{transform!s}"
    return PartitionSpec(PartitionField(source, 1000, transform, name))


def partition_by(txn: Transaction, transform: Transform[Any, Any] | None) -> bool:
    """The transaction's table partitioned by this transform of `__time` from now on (None:
    unpartitioned; a spec it had before is taken again, its id and its fields' ids); whether
    it was not so already. A snapshot's added files are written under the spec that is the
    default when they are added (pyiceberg writes its added manifest so)."""
    spec = txn.table_metadata.spec()
    if partitioned_by(spec, transform):
        return False
    with txn.update_spec() as update:
        for field in spec.fields:
            update.remove_field(field.name)
        if transform is not None:
            update.add_field(TIME, transform, f"{TIME}_{transform}")
    return True


def partitioned_by(spec: PartitionSpec, transform: Transform[Any, Any] | None) -> bool:
    return [str(f.transform) for f in spec.fields] == (
        [] if transform is None else [str(transform)]
    )


def time_transform(spec: PartitionSpec) -> Transform[Any, Any] | None:
    """The transform of `__time` a spec of a table here partitions by (None: unpartitioned)."""
    return spec.fields[0].transform if spec.fields else None
