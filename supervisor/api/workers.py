"""Task hosts: Druid's worker listing and enable/disable (STATE READ / WRITE, as Druid
checks), and the heartbeat every `sluicegate worker` sends (STATE WRITE: a host that
registers is given tasks, their settings and secrets). Any overlord takes a heartbeat: it is
one row of the metadata DB, which the leader reads."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from supervisor.api.auth import needs
from supervisor.api.common import JSON_BODY, in_session, json_body
from supervisor.api.context import context
from supervisor.model.access import Action, ResourceType
from supervisor.schemas.worker import HeartbeatAnswer
from supervisor.services.workers import WorkerService

router = APIRouter(tags=["workers"])
READ = [Depends(needs(ResourceType.STATE, "STATE", Action.READ))]
WRITE = [Depends(needs(ResourceType.STATE, "STATE", Action.WRITE))]


@router.get(
    "/druid/indexer/v1/workers",
    dependencies=READ,
    summary="Task hosts heard from lately, with capacity and running tasks (Druid's shape)",
)
async def workers(request: Request) -> list[dict[str, Any]]:
    app = context(request)
    timeout = app.settings.worker_timeout_s
    return await in_session(request, lambda s: WorkerService(s, app.clock).listing(timeout))


@router.post(
    "/druid/indexer/v1/worker/{host}/enable",
    dependencies=WRITE,
    summary="Let a task host take new tasks again",
)
async def enable(host: str, request: Request) -> dict[str, str]:
    app = context(request)
    return await in_session(request, lambda s: WorkerService(s, app.clock).set_enabled(host, True))


@router.post(
    "/druid/indexer/v1/worker/{host}/disable",
    dependencies=WRITE,
    summary="Give a task host no new tasks (its running ones go on)",
)
async def disable(host: str, request: Request) -> dict[str, str]:
    app = context(request)
    return await in_session(request, lambda s: WorkerService(s, app.clock).set_enabled(host, False))


@router.post(
    "/druid-internal/v1/workers",
    dependencies=WRITE,
    openapi_extra=JSON_BODY,
    summary="A task host's heartbeat (it registers with the first)",
)
async def heartbeat(request: Request, raw: Any = Depends(json_body)) -> dict[str, Any]:
    app = context(request)
    settings = app.settings
    timeout = settings.worker_timeout_s
    await in_session(request, lambda s: WorkerService(s, app.clock, timeout).heartbeat(raw))
    location = settings.storage().location
    return HeartbeatAnswer(deepStorage=location, heartbeatTimeoutS=timeout).model_dump()
