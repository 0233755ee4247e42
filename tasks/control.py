"""The task's control API, Druid's chat endpoints: /druid/worker/v1/chat/{taskId}/...

Served by uvicorn in a thread of the task process; every call carries the task's token.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse

from tasks.indexer import KafkaIndexer
from tasks.indexer_state import ControlError
from tasks.partitions import offsets_from_json, offsets_json
from tasks.protocol import TOKEN_HEADER

PAUSE_WAIT_SECONDS = 2.0


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


def create_control_app(indexer: KafkaIndexer, token: str) -> FastAPI:
    task_id = indexer.task.id
    app = FastAPI(title=f"Sluicegate task {task_id}", openapi_url=None, docs_url=None)

    @app.exception_handler(ControlError)
    async def control_error(_: Request, exc: ControlError) -> JSONResponse:
        return _error(exc.status_code, exc.message)

    def authorized(
        taskId: str, given: str | None = Header(default=None, alias=TOKEN_HEADER)
    ) -> None:
        if taskId != task_id:
            raise ControlError(404, f"no task [{taskId}] here")
        if given != token:
            raise ControlError(403, "missing or wrong task token")

    router = APIRouter(prefix="/druid/worker/v1/chat/{taskId}", dependencies=[Depends(authorized)])

    @router.get("/status")
    def status() -> str:
        return str(indexer.snapshot().status)

    @router.get("/time/start")
    def start_time() -> str | None:
        started = indexer.snapshot().started_at
        if started is None:
            return None
        return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(started))

    @router.get("/offsets/current")
    def current_offsets() -> dict[str, int]:
        return offsets_json(indexer.snapshot().current)

    @router.get("/offsets/end")
    def end_offsets() -> dict[str, int]:
        return offsets_json(indexer.snapshot().end)

    @router.post("/offsets/end")
    def set_end_offsets(body: dict[str, int], finish: bool = Query(True)) -> dict[str, int]:
        try:
            offsets = offsets_from_json(body)
        except ValueError:
            raise ControlError(400, "end offsets are a map of partition to offset") from None
        return offsets_json(indexer.set_end_offsets(offsets, finish))

    @router.post("/pause", response_model=None)
    def pause() -> JSONResponse | dict[str, int]:
        offsets = indexer.pause(PAUSE_WAIT_SECONDS)
        if offsets is None:
            return JSONResponse(status_code=202, content={"status": "pausing"})
        return offsets_json(offsets)

    @router.post("/resume")
    def resume() -> dict[str, str]:
        indexer.resume()
        return {"status": str(indexer.snapshot().status)}

    @router.get("/checkpoints")
    def checkpoints() -> dict[str, dict[str, int]]:
        return indexer.checkpoints()

    @router.get("/rowStats")
    def row_stats() -> dict[str, Any]:
        stats = indexer.snapshot().stats.as_dict()
        return {"totals": {"buildSegments": stats}}

    @router.get("/metrics")
    def metrics() -> dict[str, Any]:
        """Row counts, task counters (persists, handoffs, pauses) and the current offsets in
        one answer: what a supervisor's loop asks every running task on every pass."""
        return indexer.snapshot().metrics().model_dump()

    @router.get("/unparseableEvents")
    def unparseable_events() -> dict[str, Any]:
        return {"buildSegments": indexer.snapshot().samples}

    @router.post("/stop")
    def stop() -> dict[str, str]:
        indexer.stop()
        return {"status": "stopping"}

    app.include_router(router)
    return app


class ControlServer:
    """uvicorn in a daemon thread, so the main thread can drive Spark."""

    def __init__(self, app: Any, host: str, port: int) -> None:
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="control-api", daemon=True)

    def start(self, timeout: float = 30.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the control API did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


__all__ = ["ControlServer", "create_control_app"]
