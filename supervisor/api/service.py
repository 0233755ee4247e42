"""The service's own routes: liveness, version, and Druid's ingestion metrics for
Prometheus."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import PlainTextResponse, Response

from supervisor import __version__
from supervisor.api.auth import may_read, needs
from supervisor.api.context import context as app_context
from supervisor.model.access import Action, ResourceType
from supervisor.services.metrics import exposition

router = APIRouter(tags=["service"])
STATE_READ = [Depends(needs(ResourceType.STATE, "STATE", Action.READ))]


@router.get("/status/health", summary="Liveness of the service")
def health() -> bool:
    return True


@router.get(
    "/metrics",
    dependencies=STATE_READ,
    summary="Druid's ingestion metrics in Prometheus' text format (OpenMetrics when the "
    "Accept header asks for it)",
    response_class=PlainTextResponse,
)
def metrics(request: Request) -> Response:
    context = app_context(request)
    with context.sessions() as session:
        families = context.metrics.scrape(session, context.statuses_of(session), may_read(request))
    body, content_type = exposition(families, request.headers.get("accept"))
    return Response(body, media_type=content_type)


@router.get("/status", summary="Version of the service", dependencies=STATE_READ)
def status() -> dict[str, str]:
    return {"version": __version__}
