"""Published segments as Druid's coordinator metadata API answers them: the files each
datasource's Iceberg table holds now (supervisor/lake/holdings.py), each described by the
segment row its publish wrote beside it."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import druid_timestamp
from supervisor.db.models import SegmentRow
from supervisor.db.repositories import SegmentRepository
from supervisor.errors import NotFoundError
from supervisor.lake.holdings import files_at, live_files, tables
from supervisor.lake.tables import Lake
from tasks.storage import load_spec


def datasources(session: Session, lake: Lake) -> list[str]:
    """Datasources whose table holds at least one file (each table's location read once,
    with the list)."""
    return sorted(name for name, at in tables(session).items() if files_at(lake, name, at))


def used_segments(
    session: Session, lake: Lake, datasource: str, full: bool
) -> list[str] | list[dict[str, Any]]:
    """The segments whose files the datasource's table holds: their ids, or (full) Druid's
    DataSegment objects."""
    live = live_files(lake, session, datasource) or set()
    rows = [row for row in SegmentRepository(session).used(datasource) if row.path in live]
    if not rows:
        raise NotFoundError(f"datasource [{datasource}] has no published segments")
    if not full:
        return [row.id for row in rows]
    return [data_segment(row) for row in rows]


def data_segment(row: SegmentRow) -> dict[str, Any]:
    """Druid's DataSegment, with loadSpec pointing at the Parquet file."""
    payload = row.payload or {}
    interval = f"{druid_timestamp(row.interval_start)}/{druid_timestamp(row.interval_end)}"
    return {
        "dataSource": row.datasource,
        "interval": interval,
        "version": row.version,
        "loadSpec": load_spec(row.path),
        "dimensions": ",".join(payload.get("dimensions", [])),
        "metrics": ",".join(payload.get("metrics", [])),
        "shardSpec": {"type": "numbered", "partitionNum": row.partition_num, "partitions": 0},
        "binaryVersion": None,
        "size": row.size_bytes,
        "numRows": row.num_rows,
        "identifier": row.id,
    }
