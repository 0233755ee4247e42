"""Druid's coordinator metadata API, for the segments published here."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from sqlalchemy.orm import Session

from supervisor.api.auth import identity, may_read, require
from supervisor.api.common import in_session
from supervisor.clock import druid_timestamp
from supervisor.db.models import SegmentRow
from supervisor.db.repositories import SegmentRepository
from supervisor.errors import NotFoundError
from supervisor.model.access import Action, ResourceType
from tasks.storage import load_spec

router = APIRouter(prefix="/druid/coordinator/v1/metadata", tags=["coordinator"])


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


@router.get("/datasources", summary="Datasources with published (used) segments")
async def datasources(request: Request) -> list[str]:
    readable = may_read(request)
    names = await in_session(request, lambda session: SegmentRepository(session).datasources())
    return [name for name in names if readable(name)]


def _segments(session: Session, datasource: str, full: bool) -> list[str] | list[dict[str, Any]]:
    rows = SegmentRepository(session).used(datasource)
    if not rows:
        raise NotFoundError(f"datasource [{datasource}] has no published segments")
    if not full:
        return [row.id for row in rows]
    return [data_segment(row) for row in rows]


@router.get(
    "/datasources/{datasource}/segments",
    summary="Published (used) segments of a datasource: ids, or DataSegment objects with ?full",
    response_model=None,
)
async def segments(
    datasource: str,
    request: Request,
    full: str | None = Query(default=None, description="Present: whole DataSegment objects"),
) -> list[str] | list[dict[str, Any]]:
    require(identity(request), ResourceType.DATASOURCE, datasource, Action.READ)
    return await in_session(
        request, lambda session: _segments(session, datasource, full is not None)
    )
