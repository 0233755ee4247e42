"""Druid's compaction configuration API and its status routes (supervisor/services/
compaction.py runs what they configure). A datasource's config and status need DATASOURCE
READ, a change DATASOURCE WRITE, as in Druid; the cluster-wide listing shows what the caller
may read. The cluster's own compaction config (task slots, policy) is CONFIG WRITE, as Druid's
coordinator config is."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy.orm import Session

from supervisor.api.auth import may_read, needs, require_datasource
from supervisor.api.common import JSON_BODY, actor, in_session, json_body
from supervisor.api.context import context
from supervisor.clock import utc_now
from supervisor.model.access import Action, ResourceType
from supervisor.services.compaction_config import CompactionConfigService
from supervisor.services.supervisors import Actor

router = APIRouter(prefix="/druid/coordinator/v1", tags=["compaction"])
CONFIG_WRITE = [Depends(needs(ResourceType.CONFIG, "CONFIG", Action.WRITE))]


def _service(request: Request, session: Session) -> CompactionConfigService:
    return CompactionConfigService(session, context(request).tables, utc_now())


@router.get("/config/compaction", summary="The cluster's compaction config, every datasource's")
async def cluster_config(request: Request) -> dict[str, Any]:
    readable = may_read(request)
    slots = context(request).settings.max_compaction_tasks
    found = await in_session(request, lambda session: _service(request, session).cluster(slots))
    found["compactionConfigs"] = [
        c for c in found["compactionConfigs"] if readable(str(c.get("dataSource")))
    ]
    return found


@router.post(
    "/config/compaction",
    openapi_extra=JSON_BODY,
    summary="Set a datasource's compaction config (the body names its dataSource)",
)
async def set_config(
    request: Request, raw: Any = Depends(json_body), who: Actor = Depends(actor)
) -> dict[str, str]:
    name = raw.get("dataSource") if isinstance(raw, dict) else None
    require_datasource(request, str(name or ""), Action.WRITE)
    await in_session(request, lambda session: _service(request, session).put(raw, who))
    return {}


@router.post(
    "/config/compaction/cluster",
    dependencies=CONFIG_WRITE,
    openapi_extra=JSON_BODY,
    summary="Set the cluster's compaction config (task slots, policy; the fields given)",
)
async def set_cluster(
    request: Request, raw: Any = Depends(json_body), who: Actor = Depends(actor)
) -> dict[str, str]:
    await in_session(request, lambda session: _service(request, session).set_cluster(raw, who))
    return {}


@router.post(
    "/config/compaction/taskslots",
    dependencies=CONFIG_WRITE,
    summary="Set compaction's share of the task slots and its most (Druid's older route)",
)
async def set_task_slots(
    request: Request,
    ratio: str | None = Query(default=None),
    most: str | None = Query(default=None, alias="max"),
    who: Actor = Depends(actor),
) -> dict[str, str]:
    await in_session(
        request, lambda session: _service(request, session).set_task_slots(ratio, most, who)
    )
    return {}


@router.get("/config/compaction/{datasource}", summary="A datasource's compaction config")
async def get_config(datasource: str, request: Request) -> dict[str, Any]:
    require_datasource(request, datasource, Action.READ)
    return await in_session(request, lambda session: _service(request, session).get(datasource))


@router.delete(
    "/config/compaction/{datasource}", summary="Stop compacting a datasource (its config goes)"
)
async def delete_config(
    datasource: str, request: Request, who: Actor = Depends(actor)
) -> dict[str, str]:
    require_datasource(request, datasource, Action.WRITE)
    await in_session(request, lambda session: _service(request, session).delete(datasource, who))
    return {}


@router.get("/compaction/status", summary="Each configured datasource's compaction status")
async def status(
    request: Request, dataSource: str | None = Query(default=None)
) -> dict[str, list[dict[str, Any]]]:
    readable = may_read(request)
    if dataSource is not None:
        require_datasource(request, dataSource, Action.READ)
    found = await in_session(request, lambda session: _service(request, session).status(dataSource))
    return {"latestStatus": [s for s in found if readable(str(s["dataSource"]))]}


@router.get("/compaction/progress", summary="Bytes of a datasource still awaiting compaction")
async def progress(
    request: Request, dataSource: str = Query(..., description="the datasource")
) -> dict[str, int]:
    require_datasource(request, dataSource, Action.READ)
    found = await in_session(request, lambda session: _service(request, session).status(dataSource))
    return {"remainingSegmentSize": found[0]["bytesAwaitingCompaction"]}
