"""The task host's API, called by the leader overlord with the host's token (Bearer): Druid's
MiddleManager routes (/druid/worker/v1/...) and the assignment and sync routes of its HTTP
task runner (/druid-internal/v1/worker...). The tasks serve their own chat API, as peons do."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import ValidationError

from supervisor.api.guard import json_media_type
from supervisor.schemas.worker import Placement, ShutdownAnswer
from supervisor.worker.agent import WorkerAgent
from tasks.protocol import parse_task_json
from tasks.spec.names import task_id_problem

MAX_LOG_BYTES = 16 * 1024 * 1024


def create_worker_app(agent: WorkerAgent) -> FastAPI:
    def authorized(request: Request) -> None:
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {agent.token}".encode()):
            raise HTTPException(401, "this task host answers its overlords only")
        if agent.runner is None:
            raise HTTPException(503, "not registered with an overlord yet")
        declared = request.headers.get("content-type")
        if request.method == "POST" and declared is not None and not json_media_type(declared):
            raise HTTPException(415, "a write here takes JSON (Content-Type: application/json)")

    def known_id(task_id: str) -> str:
        problem = task_id_problem(task_id)
        if problem is not None:
            raise HTTPException(400, f"task id: {problem}")
        return task_id

    app = FastAPI(title="Sluicegate task host", openapi_url=None, docs_url=None, redoc_url=None)
    guarded = APIRouter(dependencies=[Depends(authorized)])

    @app.get("/status/health")
    def health() -> bool:
        return True

    @guarded.get("/druid/worker/v1/enabled")
    def enabled() -> dict[str, bool]:
        return {agent.identity.name: True}

    @guarded.get("/druid/worker/v1/tasks")
    def running() -> list[str]:
        return agent.state().running

    @guarded.post("/druid/worker/v1/task/{task_id}/shutdown")
    def shutdown(task_id: str) -> dict[str, Any]:
        return ShutdownAnswer(task=task_id, killed=agent.kill(known_id(task_id))).model_dump()

    @guarded.get("/druid/worker/v1/task/{task_id}/log")
    def task_log(task_id: str) -> PlainTextResponse:
        path = agent.log_path(known_id(task_id))
        try:
            with path.open("rb") as log:
                log.seek(max(0, path.stat().st_size - MAX_LOG_BYTES))
                text = log.read().decode(errors="replace")
        except OSError:
            raise HTTPException(404, f"No log was found for this task [{task_id}]") from None
        return PlainTextResponse(text)

    @guarded.get("/druid-internal/v1/worker")
    def state() -> dict[str, Any]:
        return agent.state().model_dump(mode="json")

    @guarded.get("/druid-internal/v1/worker/task/{task_id}/report")
    def report(task_id: str) -> Any:
        found = agent.report(known_id(task_id))
        if found is None:
            raise HTTPException(404, f"task {task_id} left no report here")
        return found

    @guarded.post("/druid-internal/v1/worker/assignTask")
    async def assign(request: Request) -> JSONResponse:
        return await _assign(agent, request)

    app.include_router(guarded)
    return app


async def _assign(agent: WorkerAgent, request: Request) -> JSONResponse:
    """Start the task the body holds; where it serves (Placement), or why not."""
    try:
        task = parse_task_json(await request.body())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return JSONResponse({"error": f"{where}: {first.get('msg')}"}, status_code=400)
    try:
        launched = await run_in_threadpool(agent.assign, task)
    except FileExistsError:
        return JSONResponse({"error": f"task {task.id} was assigned here already"}, 409)
    except OSError as exc:
        return JSONResponse({"error": f"the task could not be started: {exc}"}, 503)
    placed = Placement(
        task=task.id,
        host=launched.host,
        port=launched.port,
        scheme=launched.scheme,
        logPath=launched.log_path,
        token=launched.token,
    )
    return JSONResponse(placed.model_dump())
