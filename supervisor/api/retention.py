"""Druid's coordinator API for retention: rules per datasource, and segments marked unused or
used (supervisor/services/retention.py). Reads need DATASOURCE READ, changes DATASOURCE
WRITE, on the datasource the path names (`_default` for the default rules)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request

from supervisor.api.auth import may_read, require_datasource
from supervisor.api.common import JSON_BODY, actor, fenced, in_session, json_body
from supervisor.api.context import context
from supervisor.api.tasks import run_kill
from supervisor.clock import utc_now
from supervisor.model.access import Action
from supervisor.services.retention import RetentionService, Selection, selection
from supervisor.services.supervisors import Actor

router = APIRouter(prefix="/druid/coordinator/v1", tags=["coordinator"])


def _service(request: Request, session: Any) -> RetentionService:
    return RetentionService(session, context(request).tables, utc_now())


@router.get("/rules", summary="Every datasource's retention rules (with _default)")
async def all_rules(request: Request) -> dict[str, list[dict[str, Any]]]:
    readable = may_read(request)
    found = await in_session(request, lambda session: _service(request, session).all_rules())
    return {name: rules for name, rules in found.items() if readable(name)}


@router.get("/rules/{datasource}", summary="A datasource's rules; ?full adds the default ones")
async def rules(
    datasource: str,
    request: Request,
    full: str | None = Query(default=None, description="Present: the default rules follow"),
) -> list[dict[str, Any]]:
    require_datasource(request, datasource, Action.READ)
    return await in_session(
        request, lambda session: _service(request, session).rules(datasource, full is not None)
    )


@router.post(
    "/rules/{datasource}",
    openapi_extra=JSON_BODY,
    summary="Replace a datasource's rules (in order; the first that applies to a segment wins)",
)
async def set_rules(
    datasource: str,
    request: Request,
    raw: Any = Depends(json_body),
    who: Actor = Depends(actor),
) -> dict[str, str]:
    require_datasource(request, datasource, Action.WRITE)
    await in_session(
        request, lambda session: _service(request, session).set_rules(datasource, raw, who)
    )
    return {}


async def _mark(request: Request, datasource: str, which: Selection, used: bool) -> int:
    require_datasource(request, datasource, Action.WRITE)

    def work(session: Any) -> int:
        epoch = fenced(request, session)
        service = _service(request, session)
        if used:
            return service.mark_used(datasource, which, epoch)
        return service.mark_unused(datasource, which, epoch)

    return await in_session(request, work)


@router.post(
    "/datasources/{datasource}/markUnused",
    openapi_extra=JSON_BODY,
    summary="Mark segments unused (by interval or segmentIds): every reader stops seeing them",
)
async def mark_unused(
    datasource: str, request: Request, raw: Any = Depends(json_body)
) -> dict[str, int]:
    require_datasource(request, datasource, Action.WRITE)
    changed = await _mark(request, datasource, selection(raw), used=False)
    return {"numChangedSegments": changed}


@router.post(
    "/datasources/{datasource}/markUsed",
    openapi_extra=JSON_BODY,
    summary="Mark unused segments used again (by interval or segmentIds), until killed",
)
async def mark_used(
    datasource: str, request: Request, raw: Any = Depends(json_body)
) -> dict[str, int]:
    require_datasource(request, datasource, Action.WRITE)
    changed = await _mark(request, datasource, selection(raw), used=True)
    return {"numChangedSegments": changed}


@router.post(
    "/datasources/{datasource}/segments/{segment_id}",
    summary="Mark one segment used again",
)
async def mark_segment_used(datasource: str, segment_id: str, request: Request) -> dict[str, bool]:
    changed = await _mark(request, datasource, Selection(ids=[segment_id]), used=True)
    return {"segmentStateChanged": changed > 0}


@router.delete(
    "/datasources/{datasource}/segments/{segment_id}",
    summary="Mark one segment unused",
)
async def mark_segment_unused(
    datasource: str, segment_id: str, request: Request
) -> dict[str, bool]:
    changed = await _mark(request, datasource, Selection(ids=[segment_id]), used=False)
    return {"segmentStateChanged": changed > 0}


@router.delete(
    "/datasources/{datasource}",
    summary="Mark every segment of a datasource unused (its files stay until killed)",
)
async def mark_datasource_unused(datasource: str, request: Request) -> dict[str, int]:
    changed = await _mark(request, datasource, Selection(), used=False)
    return {"numChangedSegments": changed}


@router.delete(
    "/datasources/{datasource}/intervals/{interval}",
    summary="Kill the unused segments lying within an interval (a/b, or a_b): rows and files",
)
async def kill_interval(
    datasource: str, interval: str, request: Request, who: Actor = Depends(actor)
) -> dict[str, str]:
    require_datasource(request, datasource, Action.WRITE)
    raw = {"type": "kill", "dataSource": datasource, "interval": interval.replace("_", "/")}
    return {"task": await run_kill(request, raw, who)}
