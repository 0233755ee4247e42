"""Druid's task API (submit, list, status, reports, log, shutdown) and the task action endpoint."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session

from supervisor.api.common import JSON_BODY, db_session, json_body
from supervisor.db.models import TaskRow
from supervisor.db.repositories import TaskRepository
from supervisor.errors import DomainError, NotFoundError
from supervisor.schemas.errors import from_validation_error
from supervisor.services.checkpoint import checkpoint_requested
from supervisor.services.publish import PublishService
from supervisor.services.tasks import RUNNING, TaskService
from tasks.protocol import TOKEN_HEADER, CheckpointAction, TaskActionRequest

log = logging.getLogger(__name__)
router = APIRouter(prefix="/druid/indexer/v1", tags=["tasks"])


class ForbiddenError(DomainError):
    status_code = 403


def service(
    request: Request, session: Session = Depends(db_session, scope="function")
) -> TaskService:
    return TaskService(session, request.app.state.clock, request.app.state.runner)


@router.post("/task", openapi_extra=JSON_BODY, summary="Submit an index_kafka task")
def submit(raw: Any = Depends(json_body), svc: TaskService = Depends(service)) -> dict[str, str]:
    return {"task": svc.submit(raw)}


@router.get("/tasks", summary="List tasks (state: running, complete, waiting, pending)")
def list_tasks(
    state: str | None = Query(None),
    datasource: str | None = Query(None),
    max: int | None = Query(None),
    svc: TaskService = Depends(service),
) -> list[dict[str, Any]]:
    return svc.list_tasks(state, datasource, max)


@router.get("/task/{task_id}", summary="A task's payload")
def payload(task_id: str, svc: TaskService = Depends(service)) -> dict[str, Any]:
    return svc.payload(task_id)


@router.get("/task/{task_id}/status", summary="A task's status")
def status(task_id: str, svc: TaskService = Depends(service)) -> dict[str, Any]:
    return svc.status(task_id)


@router.get("/task/{task_id}/reports", summary="Row stats and unparseable events of a task")
def reports(task_id: str, svc: TaskService = Depends(service)) -> dict[str, Any]:
    return svc.reports(task_id)


@router.get("/task/{task_id}/log", response_class=PlainTextResponse, summary="A task's log")
def task_log(task_id: str, svc: TaskService = Depends(service)) -> str:
    return svc.log_text(task_id)


@router.post("/task/{task_id}/shutdown", summary="Kill a task")
def shutdown(task_id: str, svc: TaskService = Depends(service)) -> dict[str, str]:
    return svc.shutdown(task_id)


@router.post(
    "/action",
    openapi_extra=JSON_BODY,
    summary="Task actions (segment publish)",
    response_model=None,
)
def action(
    request: Request,
    raw: Any = Depends(json_body),
    token: str | None = Header(default=None, alias=TOKEN_HEADER),
    session: Session = Depends(db_session, scope="function"),
) -> JSONResponse | dict[str, Any]:
    try:
        holder = TaskActionRequest.model_validate(raw)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    task = TaskRepository(session).get(holder.task)
    if task is None:
        raise NotFoundError(f"Cannot find any task with id: [{holder.task}]")
    if task.token is None or token != task.token:
        raise ForbiddenError("missing or wrong task token")
    act = holder.action
    expected_key = task.supervisor_id or task.datasource
    if act.supervisorId != expected_key:
        raise ForbiddenError("the action names another supervisor than the task")
    if task.status != RUNNING:
        return JSONResponse(
            status_code=409,
            content={"error": f"task is {task.status}", "outcome": "failed", "retryable": False},
        )
    if isinstance(act, CheckpointAction):
        replicas = TaskRepository(session).replicas(task)
        start = act.checkpointMetadata.partitionSequenceNumberMap
        start_checkpoint(request, expected_key or "", replicas, task.id, start)
        return {"result": {"outcome": "accepted"}}
    if act.dataSource != task.datasource:
        raise ForbiddenError("the action names another datasource than the task")
    began = time.monotonic()
    result = PublishService(session, request.app.state.clock).publish(task.id, act)
    request.app.state.metrics.publish.observe(
        act.dataSource, str(result.outcome), time.monotonic() - began
    )
    if result.success:
        return {"result": {"outcome": str(result.outcome)}}
    return JSONResponse(
        status_code=409,
        content={
            "error": result.reason,
            "outcome": str(result.outcome),
            "retryable": result.outcome == "retry",
        },
    )


def start_checkpoint(
    request: Request,
    supervisor_id: str,
    replicas: list[TaskRow],
    requester: str,
    start: dict[str, int],
) -> None:
    """Hand the checkpoint to the supervisor's loop (one writer per supervisor); a task with no
    running supervisor gets it in a thread of its own. The task does not wait either way."""
    manager = request.app.state.supervisors
    if request.app.state.settings.run_supervisors and manager.request_checkpoint(
        supervisor_id, requester, start
    ):
        return
    threading.Thread(
        target=checkpoint_requested,
        args=(replicas, requester, start),
        name=f"checkpoint-{requester}",
        daemon=True,
    ).start()
