"""Druid's task API (submit, list, status, reports, log, shutdown) and the task action endpoint."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session

from supervisor.api.auth import may_read, on_task
from supervisor.api.common import (
    JSON_BODY,
    actor,
    fenced,
    in_session,
    intended,
    json_body,
    leader_epoch,
)
from supervisor.api.context import AppContext, context
from supervisor.clock import utc_now
from supervisor.errors import ForbiddenError, NotLeading
from supervisor.model.access import Action
from supervisor.services import lookups
from supervisor.services.compaction_commit import CompactionCommit
from supervisor.services.kill import KillService
from supervisor.services.publish import PublishService
from supervisor.services.supervisors import Actor
from supervisor.services.task_life import TaskLife
from supervisor.services.tasks import MAX_TASKS_LISTED, TaskService
from tasks.protocol import (
    TOKEN_HEADER,
    CheckpointAction,
    PublishOutcome,
    ReplaceAction,
    TaskActionRequest,
    TaskStatusCode,
)
from tasks.spec.errors import from_validation_error

log = logging.getLogger(__name__)
router = APIRouter(prefix="/druid/indexer/v1", tags=["tasks"])
T = TypeVar("T")
READ = [Depends(on_task(Action.READ))]  # the task's datasource, as Druid checks
WRITE = [Depends(on_task(Action.WRITE))]


async def with_service(request: Request, work: Callable[[TaskService], T]) -> T:
    """`work` with a TaskService on a session of its own (api.common.in_session)."""
    app = context(request)
    return await in_session(
        request,
        lambda session: work(_service(session, app)),
    )


@router.post("/task", openapi_extra=JSON_BODY, summary="Submit an index_kafka or a kill task")
async def submit(
    request: Request, raw: Any = Depends(json_body), who: Actor = Depends(actor)
) -> dict[str, str]:
    if isinstance(raw, dict) and raw.get("type") == "kill":
        return {"task": await run_kill(request, raw, who)}
    access = context(request).kafka_access
    return {"task": await with_service(request, lambda svc: svc.submit(raw, access, who))}


async def run_kill(request: Request, raw: dict[str, Any], who: Actor) -> str:
    """A kill task, run now in a transaction that checks this overlord leads; its id."""

    def work(session: Session) -> str:
        epoch = fenced(request, session)
        return KillService(session, context(request).tables, utc_now()).submit(raw, who, epoch)

    return await in_session(request, work)


@router.get("/tasks", summary="List tasks (state: running, complete, waiting, pending)")
async def list_tasks(
    request: Request,
    state: str | None = Query(None),
    datasource: str | None = Query(None),
    max: int | None = Query(None, le=MAX_TASKS_LISTED),
    type: str | None = Query(None),
    createdTimeInterval: str | None = Query(None),
) -> list[dict[str, Any]]:
    readable = may_read(request)
    listed = await with_service(
        request, lambda svc: svc.list_tasks(state, datasource, max, type, createdTimeInterval)
    )
    return [entry for entry in listed if readable(str(entry.get("dataSource", "")))]


def _in_state(state: str) -> Callable[..., Awaitable[list[dict[str, Any]]]]:
    """Druid's older list routes: /tasks?state=<state> under a name of their own."""

    async def listed(
        request: Request,
        datasource: str | None = Query(None),
        max: int | None = Query(None, le=MAX_TASKS_LISTED),
        type: str | None = Query(None),
        createdTimeInterval: str | None = Query(None),
    ) -> list[dict[str, Any]]:
        return await list_tasks(request, state, datasource, max, type, createdTimeInterval)

    return listed


for _state in ("running", "complete", "waiting", "pending"):
    router.add_api_route(
        f"/{_state}Tasks",
        _in_state(_state),
        methods=["GET"],
        summary=f"List {_state} tasks (as /tasks?state={_state})",
    )


@router.post(
    "/datasources/{datasource}/shutdownAllTasks",
    summary="Shut down every running task of a datasource",
)
async def shutdown_all(
    datasource: str, request: Request, who: Actor = Depends(actor)
) -> dict[str, str]:
    # intents, as one task's shutdown: each owner's pass kills its tasks (a supervisor's
    # tasks are replaced by its next pass, as in Druid)
    app = context(request)

    def work(session: Session) -> set[str]:
        fenced(request, session)
        return _service(session, app).request_shutdown_all(datasource, who)

    def wake(owners: set[str]) -> None:
        for owner in sorted(owners):
            intended(request, owner)

    await in_session(request, work, wake)
    return {"dataSource": datasource}


@router.get("/task/{task_id}", summary="A task's payload", dependencies=READ)
async def payload(task_id: str, request: Request) -> dict[str, Any]:
    return await with_service(request, lambda svc: svc.payload(task_id))


@router.get("/task/{task_id}/status", summary="A task's status", dependencies=READ)
async def status(task_id: str, request: Request) -> dict[str, Any]:
    return await with_service(request, lambda svc: svc.status(task_id))


@router.get(
    "/task/{task_id}/reports",
    summary="Row stats and unparseable events of a task",
    dependencies=READ,
)
async def reports(task_id: str, request: Request) -> dict[str, Any]:
    return await with_service(request, lambda svc: svc.reports(task_id))


@router.get(
    "/task/{task_id}/log",
    response_class=PlainTextResponse,
    summary="A task's log",
    dependencies=READ,
)
async def task_log(task_id: str, request: Request) -> str:
    return await with_service(request, lambda svc: svc.log_text(task_id))


@router.post("/task/{task_id}/shutdown", summary="Kill a task", dependencies=WRITE)
async def shutdown(task_id: str, request: Request, who: Actor = Depends(actor)) -> dict[str, str]:
    # an intent the leader's next pass of the task's supervisor carries out, as Druid's
    # shutdown is asynchronous too: the task's status says FAILED once it is done
    app = context(request)

    def work(session: Session) -> str | None:
        fenced(request, session)
        return _service(session, app).request_shutdown(task_id, who)

    await in_session(request, work, lambda owner: intended(request, owner))
    return {"task": task_id}


@router.post(
    "/action",
    openapi_extra=JSON_BODY,
    summary="Task actions (segment publish, a compaction's replace)",
    response_model=None,
)
async def action(
    request: Request,
    raw: Any = Depends(json_body),
    token: str | None = Header(default=None, alias=TOKEN_HEADER),
) -> JSONResponse | dict[str, Any]:
    try:
        holder = TaskActionRequest.model_validate(raw)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    acted = await in_session(request, lambda session: _act(request, session, holder, token))
    if isinstance(acted, Intended):
        intended(request, acted.owner)
        return {"result": {"outcome": "accepted"}}
    return acted


@dataclass(frozen=True)
class Intended:
    """The action was an intent, committed, for `owner`'s pass."""

    owner: str


def _act(
    request: Request, session: Session, holder: TaskActionRequest, token: str | None
) -> JSONResponse | dict[str, Any] | Intended:
    task = lookups.task(session, holder.task)
    if task is not None and task.token is None and task.status == TaskStatusCode.RUNNING and token:
        # launched, but where it runs (and its token) not recorded yet: a quick task (a small
        # compaction) can get here first; it asks again
        return JSONResponse(
            status_code=409,
            content={
                "error": "the task's launch is not recorded yet; try again",
                "outcome": str(PublishOutcome.RETRY),
                "retryable": True,
            },
        )
    # the token first, the same answer for a task that does not exist: a caller without the
    # task's token learns nothing of which tasks there are
    known = task.token if task is not None and task.token is not None else None
    if not hmac.compare_digest((token or "").encode(), (known or "\0").encode()) or task is None:
        raise ForbiddenError("missing or wrong task token")
    act = holder.action
    expected_key = task.supervisor_id or task.datasource
    if act.supervisorId != expected_key:
        raise ForbiddenError("the action names another supervisor than the task")
    if task.status != TaskStatusCode.RUNNING and not isinstance(act, ReplaceAction):
        # (a compact task's commit says whether its files are in, whatever the task became)
        return JSONResponse(
            status_code=409,
            content={
                "error": f"task is {task.status}",
                "outcome": str(PublishOutcome.FAILED),
                "retryable": False,
            },
        )
    app = context(request)
    try:  # a checkpoint's intent is fenced here; a publish in its own transaction (below)
        checkpoint = isinstance(act, CheckpointAction)
        epoch = fenced(request, session) if checkpoint else leader_epoch(request)
    except NotLeading as exc:
        log.warning("%s of task %s refused: %s", type(act).__name__, task.id, exc)
        raise
    if isinstance(act, CheckpointAction):
        # the supervisor's pass closes the sequence on every replica (one writer per
        # supervisor); the task does not wait
        start = act.checkpointMetadata.partitionSequenceNumberMap
        return Intended(_service(session, app).request_checkpoint(task, start))
    if act.dataSource != task.datasource:
        raise ForbiddenError("the action names another datasource than the task")
    if isinstance(act, ReplaceAction) != (task.type == "compact"):
        raise ForbiddenError(f"a {task.type} task does not {act.type}")
    if isinstance(act, ReplaceAction):
        result = CompactionCommit(session, app.tables, app.clock, epoch).commit(task, act)
    else:
        began = time.monotonic()
        result = PublishService(session, app.clock, epoch, app.lake).publish(task.id, act)
        app.metrics.publish.observe(act.dataSource, str(result.outcome), time.monotonic() - began)
    if result.success:
        return {"result": {"outcome": str(result.outcome)}}
    return JSONResponse(
        status_code=409,
        content={
            "error": result.reason,
            "outcome": str(result.outcome),
            "retryable": result.outcome is PublishOutcome.RETRY,
        },
    )


def _service(session: Session, app: AppContext) -> TaskService:
    return TaskService(TaskLife(session, app.clock, app.runner, app.fence, app.unsettled))
