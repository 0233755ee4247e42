"""Apache Druid's supervisor API: same paths, bodies and status codes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Depends, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from supervisor.api.common import JSON_BODY, actor, db_session, json_body
from supervisor.db.models import SupervisorSpecRow
from supervisor.db.repositories import SpecRepository
from supervisor.schemas.errors import SpecError
from supervisor.schemas.secrets import mask_spec
from supervisor.services.status import parse_errors, stats_report, status_report
from supervisor.services.supervisors import RESET_REASON, Actor, SupervisorService, state_of
from supervisor.services.tasks import TaskService

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
    if not spec and not system:
        return entry
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
    svc.session.commit()  # before the response (see api.common.db_session)
    wake(supervisor_id)
    return {"id": supervisor_id}


@router.get("", summary="List supervisors (ids, or summaries with ?full, ?state=true, ?system)")
def list_supervisors(
    full: str | None = Query(None),
    state: str | None = Query(None),
    system: str | None = Query(None),
    svc: SupervisorService = Depends(service),
) -> list[Any]:
    if system is not None:
        return [_summary(row, spec=False, system=True) for row in svc.list_active()]
    if full is not None:
        return [_summary(row, spec=True, system=False) for row in svc.list_active()]
    specs = SpecRepository(svc.session)  # the specs themselves are not needed: not read
    if state is not None and state.lower() != "false":
        return [_summary(row, spec=False, system=False) for row in specs.all_active(payload=False)]
    return specs.active_ids()


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
    svc.session.commit()
    wake(None)
    return SUCCESS


@router.post("/resumeAll", summary="Resume every supervisor")
def resume_all(
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    svc.set_all_suspended(False, who)
    svc.session.commit()
    wake(None)
    return SUCCESS


@router.post("/terminateAll", summary="Terminate every supervisor")
def terminate_all(
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    svc.terminate_all(who)
    svc.session.commit()
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
    svc.session.commit()
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
    svc.session.commit()
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
    svc.session.commit()
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


@router.get("/{supervisor_id}/stats", summary="Row counts of each running task, by task group")
def supervisor_stats(
    supervisor_id: str, request: Request, session: Session = Depends(db_session, scope="function")
) -> dict[str, Any]:
    return stats_report(session, request.app.state, supervisor_id)


@router.get("/{supervisor_id}/parseErrors", summary="Sampled unparseable records of running tasks")
def supervisor_parse_errors(
    supervisor_id: str, request: Request, session: Session = Depends(db_session, scope="function")
) -> list[dict[str, Any]]:
    return parse_errors(session, request.app.state, supervisor_id)


def _kill_tasks(
    request: Request, session: Session, supervisor_id: str, groups: set[int] | None
) -> None:
    """The supervisor's loop kills them at its next pass (one writer per supervisor), so a
    pass planned on the old offsets cannot leave a task behind; with no loop, at once."""
    if request.app.state.settings.run_supervisors and request.app.state.supervisors.request_restart(
        supervisor_id, groups
    ):
        return
    tasks = TaskService(session, request.app.state.clock, request.app.state.runner)
    tasks.kill_running(supervisor_id, groups, RESET_REASON)


@router.post("/{supervisor_id}/reset", summary="Forget the committed offsets and kill the tasks")
def reset(
    supervisor_id: str,
    request: Request,
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    svc.reset(supervisor_id, who)
    svc.session.commit()
    _kill_tasks(request, svc.session, supervisor_id, None)
    wake(supervisor_id)
    return {"id": supervisor_id}


@router.post(
    "/{supervisor_id}/resetOffsets",
    openapi_extra=JSON_BODY,
    summary="Set the committed offsets of chosen partitions; their groups restart",
)
def reset_offsets(
    supervisor_id: str,
    request: Request,
    raw: Any = Depends(json_body),
    svc: SupervisorService = Depends(service),
    who: Actor = Depends(actor),
    wake: Nudge = Depends(nudge),
) -> dict[str, str]:
    groups = svc.reset_offsets(supervisor_id, raw, who)
    svc.session.commit()
    _kill_tasks(request, svc.session, supervisor_id, set(groups))
    wake(supervisor_id)
    return {"id": supervisor_id}


@router.post(
    "/{supervisor_id}/taskGroups/handoff",
    openapi_extra=JSON_BODY,
    summary="Roll the named task groups over now (best effort)",
)
def handoff(
    supervisor_id: str,
    request: Request,
    raw: Any = Depends(json_body),
    svc: SupervisorService = Depends(service),
) -> dict[str, Any]:
    svc.get(supervisor_id)  # 404 for unknown ids
    groups = raw.get("taskGroupIds") if isinstance(raw, dict) else None
    if not isinstance(groups, list) or not groups:
        raise SpecError.single("taskGroupIds", "must list at least one task group id")
    if not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in groups):
        raise SpecError.single("taskGroupIds", "task group ids are non-negative integers")
    if request.app.state.settings.run_supervisors:
        request.app.state.supervisors.request_handoff(supervisor_id, groups)
    return {}


@router.get(
    "/{supervisor_id}/health", summary="200 when healthy, 503 when not", response_model=None
)
def health(
    supervisor_id: str, request: Request, session: Session = Depends(db_session, scope="function")
) -> JSONResponse | dict[str, bool]:
    payload = status_report(session, request.app.state, supervisor_id)["payload"]
    if payload["healthy"]:
        return {"healthy": True}
    return JSONResponse(status_code=503, content={"healthy": False})
