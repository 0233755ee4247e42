"""Druid's overlord leadership endpoints: who leads, and whether this overlord does."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse

from supervisor.api.auth import needs
from supervisor.api.context import context
from supervisor.errors import NotLeading
from supervisor.model.access import Action, ResourceType

router = APIRouter(
    prefix="/druid/indexer/v1",
    tags=["overlord"],
    dependencies=[Depends(needs(ResourceType.STATE, "STATE", Action.READ))],
)


@router.get("/leader", response_class=PlainTextResponse, summary="The leading overlord's URL")
async def leader(request: Request) -> str:
    url = await run_in_threadpool(context(request).leader_url)
    if url is None:
        raise NotLeading("no overlord leads the metadata DB right now")
    return url


@router.get(
    "/isLeader",
    summary="200 {leader: true} on the leading overlord, 404 {leader: false} on the others",
    response_model=None,
)
async def is_leader(request: Request) -> JSONResponse | dict[str, bool]:
    if context(request).leading:
        return {"leader": True}
    return JSONResponse(status_code=404, content={"leader": False})
