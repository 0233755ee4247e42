"""Apache Druid's supervisor API: same paths, bodies and status codes."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from supervisor.api import compaction_supervisors
from supervisor.api.auth import forget_supervisor, identity, may_read, on_supervisor
from supervisor.api.common import JSON_BODY, actor, fenced, in_session, intended, json_body
from supervisor.api.context import context
from supervisor.model.access import Action
from supervisor.model.compaction import is_autocompact
from supervisor.services import lookups
from supervisor.services.history import MAX_HISTORY
from supervisor.services.status import (
    parse_errors,
    states,
    stats_report,
    status_report,
    summary,
)
from supervisor.services.supervisors import Actor, SupervisorService
from tasks.spec.errors import SpecError

log = logging.getLogger(__name__)
router = APIRouter(prefix="/druid/indexer/v1/supervisor", tags=["supervisors"])
SUCCESS = {"status": "success"}
READ = [Depends(on_supervisor(Action.READ))]  # the supervisor's datasource, as Druid checks
WRITE = [Depends(on_supervisor(Action.WRITE))]
T = TypeVar("T")


async def with_service(
    request: Request,
    work: Callable[[SupervisorService], T],
    then: Callable[[T], None] | None = None,
) -> T:
    """`work` with a SupervisorService on a session of its own (api.common.in_session)."""
    app = context(request)
    return await in_session(
        request,
        lambda session: work(SupervisorService(session, app.clock, app.kafka_access, app.lake)),
        then,
    )


def waking(request: Request, supervisor_id: str | None) -> Callable[[Any], None]:
    """Wakes the supervisor's loop (None: every loop) once a change is committed, in the same
    hop to the thread pool as the change."""

    def wake(_: Any) -> None:
        manager = context(request).supervisors
        if manager is None:
            return
        try:
            if supervisor_id is None:
                manager.sync()
                manager.wake_all()
            else:
                manager.wake(supervisor_id)
        except Exception as exc:  # the change is committed: the loop's next period sees it
            log.warning("supervisor %s: loop not woken: %s", supervisor_id or "(all)", exc)

    return wake


@router.post("", openapi_extra=JSON_BODY, summary="Create or update a supervisor")
async def submit(
    request: Request,
    raw: Any = Depends(json_body),
    skipRestartIfUnmodified: bool = Query(False),
    who: Actor = Depends(actor),
) -> dict[str, str]:
    if is_autocompact(raw):
        return {"id": await compaction_supervisors.submit(request, raw, who)}

    def then(result: tuple[str, bool]) -> None:
        if result[1]:  # a new version; an unchanged spec (skipRestartIfUnmodified) wakes none
            forget_supervisor(request, result[0])
            waking(request, result[0])(result)

    supervisor_id, _ = await with_service(
        request,
        lambda svc: svc.submit(raw, who, skip_if_unmodified=skipRestartIfUnmodified),
        then,
    )
    return {"id": supervisor_id}


def _listing(request: Request, svc: SupervisorService, full: bool, system: bool) -> list[Any]:
    """What the identity may read (as Druid's list filters)."""
    readable = may_read(request)
    if full or system:
        status = context(request).statuses_of(svc.session)
        return [
            summary(status, row, spec=full, system=system)
            for row in svc.list_active()
            if readable(row.datasource)
        ] + compaction_supervisors.listed(request, svc.session, spec=full, system=system)
    compacting = compaction_supervisors.listed_ids(request, svc.session)
    if identity(request).authenticated:
        states = lookups.active_states(svc.session)
        streaming = [one for one, datasource, _ in states if readable(datasource)]
        return streaming + compacting
    return lookups.active_ids(svc.session) + compacting


def _states(request: Request, session: Session) -> list[dict[str, Any]]:
    """?state=true: each supervisor's state as its loop last saw it (as Druid's list does)."""
    status = context(request).statuses_of(session)
    readable = may_read(request)
    return [
        {
            "id": supervisor_id,
            **states(status(supervisor_id), suspended),
            "dataSource": datasource,
            "suspended": suspended,
        }
        for supervisor_id, datasource, suspended in lookups.active_states(session)
        if readable(datasource)
    ] + compaction_supervisors.listed(request, session, spec=False, system=False)


@router.get("", summary="List supervisors (ids, or summaries with ?full, ?state=true, ?system)")
async def list_supervisors(
    request: Request,
    full: str | None = Query(None),
    state: str | None = Query(None),
    system: str | None = Query(None),
) -> list[Any]:
    if state is not None and state.lower() != "false":
        return await in_session(request, lambda session: _states(request, session))
    return await with_service(
        request, lambda svc: _listing(request, svc, full is not None, system is not None)
    )


TRUNCATED = "X-Sluicegate-Truncated"  # a history answer left older versions off


@router.get("/history", summary="Spec history of every supervisor (?count: newest per supervisor)")
async def all_history(
    request: Request, response: Response, count: int | None = Query(None, le=MAX_HISTORY)
) -> dict[str, list[dict[str, Any]]]:
    readable = may_read(request)
    history = await with_service(request, lambda svc: svc.all_history(count, readable))
    if history.truncated:
        response.headers[TRUNCATED] = "true"
    compacting = await compaction_supervisors.histories(request, count or MAX_HISTORY)
    return dict(sorted((history.versions | compacting).items()))


@router.post("/suspendAll", summary="Suspend every supervisor")
async def suspend_all(request: Request, who: Actor = Depends(actor)) -> dict[str, str]:
    await with_service(request, lambda svc: svc.set_all_suspended(True, who), waking(request, None))
    await compaction_supervisors.for_all(request, who, True)
    return SUCCESS


@router.post("/resumeAll", summary="Resume every supervisor")
async def resume_all(request: Request, who: Actor = Depends(actor)) -> dict[str, str]:
    await with_service(
        request, lambda svc: svc.set_all_suspended(False, who), waking(request, None)
    )
    await compaction_supervisors.for_all(request, who, False)
    return SUCCESS


@router.post("/terminateAll", summary="Terminate every supervisor")
async def terminate_all(request: Request, who: Actor = Depends(actor)) -> dict[str, str]:
    await with_service(request, lambda svc: svc.terminate_all(who), waking(request, None))
    await compaction_supervisors.for_all(request, who, None)
    return SUCCESS


@router.get("/{supervisor_id}", summary="The current spec of a supervisor", dependencies=READ)
async def get_spec(supervisor_id: str, request: Request) -> dict[str, Any]:
    return await with_service(request, lambda svc: svc.get(supervisor_id))


@router.get(
    "/{supervisor_id}/history",
    summary="Spec versions of a supervisor, newest first",
    dependencies=READ,
)
async def history(
    supervisor_id: str,
    request: Request,
    response: Response,
    count: int | None = Query(None, le=MAX_HISTORY),
) -> list[dict[str, Any]]:
    history = await with_service(request, lambda svc: svc.history(supervisor_id, count))
    if history.truncated:
        response.headers[TRUNCATED] = "true"
    return history.versions[supervisor_id]


@router.post("/{supervisor_id}/suspend", summary="Suspend a supervisor", dependencies=WRITE)
async def suspend(
    supervisor_id: str,
    request: Request,
    who: Actor = Depends(actor),
) -> dict[str, Any]:
    return await with_service(
        request,
        lambda svc: svc.set_suspended(supervisor_id, True, who),
        waking(request, supervisor_id),
    )


@router.post("/{supervisor_id}/resume", summary="Resume a suspended supervisor", dependencies=WRITE)
async def resume(
    supervisor_id: str,
    request: Request,
    who: Actor = Depends(actor),
) -> dict[str, Any]:
    return await with_service(
        request,
        lambda svc: svc.set_suspended(supervisor_id, False, who),
        waking(request, supervisor_id),
    )


@router.post(
    "/{supervisor_id}/terminate",
    summary="Terminate a supervisor (writes a tombstone)",
    dependencies=WRITE,
)
async def terminate(
    supervisor_id: str,
    request: Request,
    who: Actor = Depends(actor),
) -> dict[str, str]:
    await with_service(
        request, lambda svc: svc.terminate(supervisor_id, who), waking(request, supervisor_id)
    )
    return {"id": supervisor_id}


@router.post(
    "/{supervisor_id}/shutdown",
    summary="Deprecated alias of terminate",
    deprecated=True,
    dependencies=WRITE,
)
async def shutdown(
    supervisor_id: str,
    request: Request,
    who: Actor = Depends(actor),
) -> dict[str, str]:
    return await terminate(supervisor_id, request, who)


@router.get(
    "/{supervisor_id}/status",
    summary="Live status: state, tasks, offsets and lag",
    dependencies=READ,
)
async def supervisor_status(supervisor_id: str, request: Request) -> dict[str, Any]:
    return await in_session(request, lambda s: _status(request, s, supervisor_id))


def _status(request: Request, session: Session, supervisor_id: str) -> dict[str, Any]:
    app = context(request)
    return status_report(session, app.status(session, supervisor_id), app.clock(), supervisor_id)


@router.get(
    "/{supervisor_id}/stats",
    summary="Row counts of each running task, by task group",
    dependencies=READ,
)
async def supervisor_stats(supervisor_id: str, request: Request) -> dict[str, Any]:
    clock = context(request).clock
    return await in_session(request, lambda s: stats_report(s, clock(), supervisor_id))


@router.get(
    "/{supervisor_id}/parseErrors",
    summary="Sampled unparseable records of running tasks",
    dependencies=READ,
)
async def supervisor_parse_errors(supervisor_id: str, request: Request) -> list[dict[str, Any]]:
    clock = context(request).clock
    return await in_session(request, lambda s: parse_errors(s, clock(), supervisor_id))


async def with_intent(
    request: Request, supervisor_id: str, work: Callable[[SupervisorService], object]
) -> None:
    """`work` writes an intent for the supervisor's pass: it runs in a transaction that checks
    this overlord still leads, and the pass is woken once it is committed. The leader's pass
    carries it out (one writer per supervisor: a reset's kill cannot race a pass planned on
    the old offsets)."""

    def fenced_work(svc: SupervisorService) -> None:
        fenced(request, svc.session)
        work(svc)

    await with_service(request, fenced_work, lambda _: intended(request, supervisor_id))


@router.post(
    "/{supervisor_id}/reset",
    summary="Forget the committed offsets and kill the tasks",
    dependencies=WRITE,
)
async def reset(
    supervisor_id: str,
    request: Request,
    who: Actor = Depends(actor),
) -> dict[str, str]:
    # the offsets and the restart intent in one transaction
    await with_intent(request, supervisor_id, lambda svc: svc.reset(supervisor_id, who))
    return {"id": supervisor_id}


@router.post(
    "/{supervisor_id}/resetOffsets",
    openapi_extra=JSON_BODY,
    summary="Set the committed offsets of chosen partitions; their groups restart",
    dependencies=WRITE,
)
async def reset_offsets(
    supervisor_id: str,
    request: Request,
    raw: Any = Depends(json_body),
    who: Actor = Depends(actor),
) -> dict[str, str]:
    await with_intent(
        request, supervisor_id, lambda svc: svc.reset_offsets(supervisor_id, raw, who)
    )
    return {"id": supervisor_id}


def _handoff_groups(raw: Any) -> list[int]:
    groups = raw.get("taskGroupIds") if isinstance(raw, dict) else None
    if not isinstance(groups, list) or not groups:
        raise SpecError.single("taskGroupIds", "must list at least one task group id")
    if not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in groups):
        raise SpecError.single("taskGroupIds", "task group ids are non-negative integers")
    return groups


@router.post(
    "/{supervisor_id}/taskGroups/handoff",
    openapi_extra=JSON_BODY,
    summary="Roll the named task groups over now (best effort)",
    dependencies=WRITE,
)
async def handoff(
    supervisor_id: str,
    request: Request,
    raw: Any = Depends(json_body),
    who: Actor = Depends(actor),
) -> dict[str, Any]:
    await with_intent(
        request,
        supervisor_id,
        lambda svc: svc.request_handoff(supervisor_id, _handoff_groups(raw), who),
    )
    return {}


@router.get(
    "/{supervisor_id}/health",
    summary="200 when healthy, 503 when not",
    response_model=None,
    dependencies=READ,
)
async def health(supervisor_id: str, request: Request) -> JSONResponse | dict[str, bool]:
    report = await in_session(request, lambda s: _status(request, s, supervisor_id))
    if report["payload"]["healthy"]:
        return {"healthy": True}
    return JSONResponse(status_code=503, content={"healthy": False})
