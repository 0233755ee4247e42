"""Druid's supervisor API for compaction supervisors (`autocompact__<dataSource>`; the routes
of api/supervisors.py take their submit and list). Reading one needs DATASOURCE READ on its
datasource, changing it DATASOURCE WRITE, as for a streaming supervisor. What only a
streaming supervisor does (reset, resetOffsets, a task group's handoff) is a 400."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy.orm import Session

from supervisor.api.auth import may_read, require_datasource
from supervisor.api.common import actor, in_session
from supervisor.api.context import context
from supervisor.clock import utc_now
from supervisor.errors import BadRequestError
from supervisor.model.access import Action
from supervisor.model.compaction import supervisor_id
from supervisor.services.compaction_supervisors import (
    NOT_SUPPORTED,
    CompactionSupervisors,
    summary,
)
from supervisor.services.history import MAX_HISTORY
from supervisor.services.supervisors import Actor

PATH = "/autocompact__{datasource}"
router = APIRouter(prefix="/druid/indexer/v1/supervisor", tags=["compaction"])
T = TypeVar("T")


def on_datasource(action: Action) -> Callable[[Request, str], Awaitable[None]]:
    async def check(request: Request, datasource: str) -> None:
        require_datasource(request, datasource, action)

    return check


READ = [Depends(on_datasource(Action.READ))]
WRITE = [Depends(on_datasource(Action.WRITE))]


async def run(request: Request, work: Callable[[CompactionSupervisors], T]) -> T:
    def in_it(session: Session) -> T:
        return work(CompactionSupervisors(session, context(request).tables, utc_now()))

    return await in_session(request, in_it)


def _id(datasource: str) -> str:
    return supervisor_id(datasource)


def listed(request: Request, session: Session, *, spec: bool, system: bool) -> list[Any]:
    """The entries of the supervisor list (api/supervisors.py) for the compaction
    supervisors the caller may read."""
    rows = CompactionSupervisors(session, context(request).tables, utc_now()).rows(
        may_read(request)
    )
    return [summary(row, spec=spec, system=system) for row in rows]


def listed_ids(request: Request, session: Session) -> list[str]:
    return [entry["id"] for entry in listed(request, session, spec=False, system=False)]


async def submit(request: Request, raw: object, who: Actor) -> str:
    return await run(request, lambda svc: svc.submit(raw, who))


async def for_all(request: Request, who: Actor, suspended: bool | None) -> None:
    """suspendAll (True), resumeAll (False) or terminateAll (None) on the compaction
    supervisors the caller may write."""
    await run(request, lambda svc: svc.for_all(who, suspended))


async def histories(request: Request, count: int) -> dict[str, list[dict[str, Any]]]:
    def read(svc: CompactionSupervisors) -> dict[str, list[dict[str, Any]]]:
        ids = [supervisor_id(row.datasource) for row in svc.rows(may_read(request))]
        return {one: svc.history(one, count) for one in ids}

    return await run(request, read)


@router.get(PATH, summary="A compaction supervisor's spec", dependencies=READ)
async def get_spec(datasource: str, request: Request) -> dict[str, Any]:
    return await run(request, lambda svc: svc.spec(_id(datasource)))


@router.get(f"{PATH}/status", summary="A compaction supervisor's status", dependencies=READ)
async def status(datasource: str, request: Request) -> dict[str, Any]:
    return await run(request, lambda svc: svc.status(_id(datasource), utc_now()))


@router.get(
    f"{PATH}/history", summary="A compaction supervisor's versions, newest first", dependencies=READ
)
async def history(
    datasource: str, request: Request, count: int | None = Query(None, le=MAX_HISTORY)
) -> list[dict[str, Any]]:
    if count is not None and count <= 0:
        raise BadRequestError("count must be greater than zero", field="count")
    return await run(request, lambda svc: svc.history(_id(datasource), count or MAX_HISTORY))


@router.get(f"{PATH}/health", summary="A compaction supervisor is healthy", dependencies=READ)
async def health(datasource: str, request: Request) -> dict[str, bool]:
    await run(request, lambda svc: svc.spec(_id(datasource)))
    return {"healthy": True}


@router.get(f"{PATH}/stats", summary="A compaction supervisor has no tasks", dependencies=READ)
async def stats(datasource: str, request: Request) -> dict[str, Any]:
    await run(request, lambda svc: svc.spec(_id(datasource)))
    return {}


@router.get(
    f"{PATH}/parseErrors", summary="A compaction supervisor parses nothing", dependencies=READ
)
async def parse_errors(datasource: str, request: Request) -> list[Any]:
    await run(request, lambda svc: svc.spec(_id(datasource)))
    return []


@router.post(f"{PATH}/suspend", summary="Suspend a datasource's compaction", dependencies=WRITE)
async def suspend(datasource: str, request: Request, who: Actor = Depends(actor)) -> dict[str, Any]:
    return await run(request, lambda svc: svc.set_suspended(_id(datasource), True, who))


@router.post(f"{PATH}/resume", summary="Resume a datasource's compaction", dependencies=WRITE)
async def resume(datasource: str, request: Request, who: Actor = Depends(actor)) -> dict[str, Any]:
    return await run(request, lambda svc: svc.set_suspended(_id(datasource), False, who))


@router.post(
    f"{PATH}/terminate",
    summary="Stop compacting a datasource (its config goes)",
    dependencies=WRITE,
)
async def terminate(
    datasource: str, request: Request, who: Actor = Depends(actor)
) -> dict[str, str]:
    await run(request, lambda svc: svc.terminate(_id(datasource), who))
    return {"id": _id(datasource)}


@router.post(
    f"{PATH}/shutdown", summary="Deprecated alias of terminate", deprecated=True, dependencies=WRITE
)
async def shutdown(
    datasource: str, request: Request, who: Actor = Depends(actor)
) -> dict[str, str]:
    return await terminate(datasource, request, who)


def _refuse(what: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    async def refuse(datasource: str, request: Request) -> dict[str, Any]:
        await run(request, lambda svc: svc.spec(_id(datasource)))  # a 404 for none there
        raise BadRequestError(f"{what} {NOT_SUPPORTED}")

    return refuse


for _path, _what in (
    ("reset", "Resetting"),
    ("resetOffsets", "Resetting offsets"),
    ("taskGroups/handoff", "Handing off task groups"),
):
    router.add_api_route(
        f"{PATH}/{_path}",
        _refuse(_what),
        methods=["POST"],
        summary=f"{_what}: {NOT_SUPPORTED} (400)",
        dependencies=WRITE,
    )
