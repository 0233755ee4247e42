"""The task's control API, Druid's chat endpoints: /druid/worker/v1/chat/{taskId}/...

Served by uvicorn in a thread of the task process; every call carries the task's token. An
overlord's calls also carry its leader epoch (EPOCH_HEADER): the task keeps the newest it has
seen and refuses a command (pause, end offsets, resume, stop) from an older one, the fencing
that keeps a deposed leader from touching a task its successor drives. A call with no epoch
(an operator's, with the token) is not an overlord's and is not fenced.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse

from tasks.indexer import KafkaIndexer
from tasks.indexer_state import ControlError
from tasks.partitions import offsets_from_json, offsets_json
from tasks.protocol import EPOCH_HEADER, LEADER_HEADER, TOKEN_HEADER

log = logging.getLogger(__name__)
PAUSE_WAIT_SECONDS = 2.0


class EpochFence:
    """The newest leader epoch this task has seen, raised by any overlord call that carries
    a newer one (reads too: a new leader's first look at the task fences the old one)."""

    def __init__(self, on_leader: Callable[[str], None] = lambda _: None) -> None:
        self.seen = 0
        self.on_leader = on_leader
        self._lock = threading.Lock()

    def admit(self, header: str, *, command: bool, leader: str | None = None) -> None:
        try:
            epoch = int(header)
        except ValueError:
            raise ControlError(400, f"{EPOCH_HEADER} is not an integer: {header!r}") from None
        with self._lock:
            if epoch > self.seen:
                if self.seen:
                    log.info("overlord epoch %d supersedes %d", epoch, self.seen)
                self.seen = epoch
                if leader:
                    self.on_leader(leader)
                return
            seen = self.seen
        if epoch < seen and command:
            log.warning(
                "refused a command from overlord epoch %d (the leader is at %d)", epoch, seen
            )
            raise ControlError(
                409, f"stale overlord: epoch {epoch} is older than the leader's epoch {seen}"
            )


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


def create_control_app(
    indexer: KafkaIndexer, token: str, on_leader: Callable[[str], None] = lambda _: None
) -> FastAPI:
    """The control API of the indexer's task; `on_leader`: told the URL of each newer leader
    that calls (where the task publishes from then on)."""
    task_id = indexer.task.id
    app = FastAPI(title=f"Sluicegate task {task_id}", openapi_url=None, docs_url=None)

    @app.exception_handler(ControlError)
    async def control_error(_: Request, exc: ControlError) -> JSONResponse:
        return _error(exc.status_code, exc.message)

    fence = EpochFence(on_leader)

    def authorized(
        request: Request,
        taskId: str,
        given: str | None = Header(default=None, alias=TOKEN_HEADER),
        epoch: str | None = Header(default=None, alias=EPOCH_HEADER),
        leader: str | None = Header(default=None, alias=LEADER_HEADER),
    ) -> None:
        if taskId != task_id:
            raise ControlError(404, f"no task [{taskId}] here")
        if not hmac.compare_digest(given or "", token):
            raise ControlError(403, "missing or wrong task token")
        if epoch is not None:
            fence.admit(epoch, command=request.method != "GET", leader=leader)

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

    def __init__(
        self,
        app: Any,
        host: str,
        port: int,
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
    ) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            ssl_certfile=tls_cert,
            ssl_keyfile=tls_key,
        )
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
