"""Druid's coordinator metadata API, for the segments published here."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from supervisor.api.auth import identity, may_read, require
from supervisor.api.common import in_session
from supervisor.api.context import context
from supervisor.model.access import Action, ResourceType
from supervisor.services import segments as published

router = APIRouter(prefix="/druid/coordinator/v1/metadata", tags=["coordinator"])


@router.get("/datasources", summary="Datasources whose Iceberg table holds published segments")
async def datasources(request: Request) -> list[str]:
    readable = may_read(request)
    lake = context(request).tables
    names = await in_session(request, lambda session: published.datasources(session, lake))
    return [name for name in names if readable(name)]


@router.get(
    "/datasources/{datasource}/segments",
    summary="Segments a datasource's table holds: ids, or DataSegment objects with ?full",
    response_model=None,
)
async def segments(
    datasource: str,
    request: Request,
    full: str | None = Query(default=None, description="Present: whole DataSegment objects"),
) -> list[str] | list[dict[str, Any]]:
    require(identity(request), ResourceType.DATASOURCE, datasource, Action.READ)
    lake = context(request).tables
    return await in_session(
        request,
        lambda session: published.used_segments(session, lake, datasource, full is not None),
    )
