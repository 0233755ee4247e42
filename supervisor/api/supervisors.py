"""Apache Druid's supervisor API: same paths, bodies and status codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Depends, Query, Request
from sqlalchemy.orm import Session

from supervisor.api.common import JSON_BODY, actor, db_session, json_body
from supervisor.db.models import SupervisorSpecRow
from supervisor.schemas.secrets import mask_spec
from supervisor.services.status import status_report
from supervisor.services.supervisors import Actor, SupervisorService, state_of

router = APIRouter(prefix="/druid/indexer/v1/supervisor", tags=["supervisors"])
SUCCESS = {"status": "success"}


def service(
    request: Request, session: Session = Depends(db_session, scope="function")
) -> SupervisorService:
    return SupervisorService(session, request.app.state.clock)


Nudge = Callable[[str | None], None]


def nudge(request: Request, background: BackgroundTasks) -> Nudge:
    """Wake a supervisor's loop (or all of them) once the change is committed and answered."""

    def wake(supervisor_id: str | None) -> None:
        if not request.app.state.settings.run_supervisors:
            return
        manager = request.app.state.supervisors
        if supervisor_id is None:
            background.add_task(manager.sync)
            background.add_task(manager.wake_all)
        else:
            background.add_task(manager.wake, supervisor_id)

    return wake


def _summary(row: SupervisorSpecRow, *, spec: bool, system: bool) -> dict[str, Any]:
    state = state_of(row)
    entry: dict[str, Any] = {
        "id": row.supervisor_id,
        "state": state,
        "detailedState": state,
        "healthy": True,
        "dataSource": row.datasource,
        "suspended": row.suspended,
    }
    masked = mask_spec(row.payload)
    if spec:
        entry["spec"] = masked
    if system:
        entry["type"] = row.payload.get("type", "kafka")
        entry["source"] = masked["spec"]["ioConfig"].get("topic") or masked["spec"]["ioConfig"].get(
            "topicPattern"
        )
        entry["specString"] = json.dumps(masked, separators=(",", ":"))
    return entry


@router.post("", openapi_extra=JSON_BODY, summary="Create or update a supervisor")
def submit(
    raw: Any = Depends(json_body),
    skipRestartIfUnmodified: bool = Query(False),
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    supervisor_id = svc.submit(raw, who, skip_if_unmodified=skipRestartIfUnmodified)
    wake(supervisor_id)
    return {"id": supervisor_id}


@router.get("", summary="List supervisors (ids, or summaries with ?full, ?state=true, ?system)")
def list_supervisors(
    full: str | None = Query(None),
    state: str | None = Query(None),
    system: str | None = Query(None),
    svc: SupervisorService = Depends(service),
) -> list[Any]:
    rows = svc.list_active()
    if system is not None:
        return [_summary(row, spec=False, system=True) for row in rows]
    if full is not None:
        return [_summary(row, spec=True, system=False) for row in rows]
    if state is not None and state.lower() != "false":
        return [_summary(row, spec=False, system=False) for row in rows]
    return [row.supervisor_id for row in rows]


@router.get("/history", summary="Spec history of every supervisor")
def all_history(svc: SupervisorService = Depends(service)) -> dict[str, list[dict[str, Any]]]:
    return svc.all_history()


@router.post("/suspendAll", summary="Suspend every supervisor")
def suspend_all(
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    svc.set_all_suspended(True, who)
    wake(None)
    return SUCCESS


@router.post("/resumeAll", summary="Resume every supervisor")
def resume_all(
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    svc.set_all_suspended(False, who)
    wake(None)
    return SUCCESS


@router.post("/terminateAll", summary="Terminate every supervisor")
def terminate_all(
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    svc.terminate_all(who)
    wake(None)
    return SUCCESS


@router.get("/{supervisor_id}", summary="The current spec of a supervisor")
def get_spec(supervisor_id: str, svc: SupervisorService = Depends(service)) -> dict[str, Any]:
    return svc.get(supervisor_id)


@router.get("/{supervisor_id}/history", summary="Spec versions of a supervisor, newest first")
def history(
    supervisor_id: str,
    count: int | None = Query(None),
    svc: SupervisorService = Depends(service),
) -> list[dict[str, Any]]:
    return svc.history(supervisor_id, count)


@router.post("/{supervisor_id}/suspend", summary="Suspend a supervisor")
def suspend(
    supervisor_id: str,
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, Any]:
    result = svc.set_suspended(supervisor_id, True, who)
    wake(supervisor_id)
    return result


@router.post("/{supervisor_id}/resume", summary="Resume a suspended supervisor")
def resume(
    supervisor_id: str,
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, Any]:
    result = svc.set_suspended(supervisor_id, False, who)
    wake(supervisor_id)
    return result


@router.post("/{supervisor_id}/terminate", summary="Terminate a supervisor (writes a tombstone)")
def terminate(
    supervisor_id: str,
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    svc.terminate(supervisor_id, who)
    wake(supervisor_id)
    return {"id": supervisor_id}


@router.post(
    "/{supervisor_id}/shutdown",
    summary="Deprecated alias of terminate",
    deprecated=True,
)
def shutdown(
    supervisor_id: str,
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    return terminate(supervisor_id, svc, who, wake)


@router.get("/{supervisor_id}/status", summary="Live status: state, tasks, offsets and lag")
def supervisor_status(
    supervisor_id: str, request: Request, session: Session = Depends(db_session, scope="function")
) -> dict[str, Any]:
    return status_report(session, request.app.state, supervisor_id)
