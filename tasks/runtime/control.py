"""The task's control API, Druid's chat endpoints: /druid/worker/v1/chat/{taskId}/...

Served by uvicorn in a thread of the task process; every call carries the task's token. An
overlord's calls also carry its leader epoch (EPOCH_HEADER): the task keeps the newest it has
seen and refuses a command (pause, end offsets, resume, stop) from an older one, the fencing
that keeps a deposed leader from touching a task its successor drives. A call with no epoch
(an operator's, with the token) is not an overlord's and is not fenced.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, Response

from tasks.partitions import offsets_from_json, offsets_json
from tasks.protocol import EPOCH_HEADER, LEADER_HEADER, TOKEN_HEADER
from tasks.runtime.held import Gone
from tasks.runtime.indexer import KafkaIndexer
from tasks.runtime.indexer_state import ControlError

log = logging.getLogger(__name__)
PAUSE_WAIT_SECONDS = 2.0
ARROW_STREAM = "application/vnd.apache.arrow.stream"


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


_NO_TASK = "\x00"  # the token of a task that is not here: no header can hold it


def _authorized(
    request: Request,
    taskId: str,
    given: str | None = Header(default=None, alias=TOKEN_HEADER),
    epoch: str | None = Header(default=None, alias=EPOCH_HEADER),
    leader: str | None = Header(default=None, alias=LEADER_HEADER),
) -> KafkaIndexer:
    """The task's indexer, once the call has shown the task's token (and, from an overlord,
    an epoch not older than the newest the task has seen, for a command)."""
    control = request.app.state.find(taskId)
    # a task that is not here answers as a wrong token does: the API tells a caller without
    # the task's token nothing, not even which tasks run here
    token = control.token if control is not None else _NO_TASK
    if not hmac.compare_digest(given or "", token) or control is None:
        raise ControlError(403, "missing or wrong task token")
    if epoch is not None:
        control.fence.admit(epoch, command=request.method != "GET", leader=leader)
    return cast(KafkaIndexer, control.indexer)


Task = Annotated[KafkaIndexer, Depends(_authorized)]


@dataclass
class TaskControl:
    """What the chat API needs of one task: its indexer, its token and its epoch fence."""

    indexer: KafkaIndexer
    token: str
    fence: EpochFence


CHAT = APIRouter(prefix="/druid/worker/v1/chat/{taskId}")  # every task's chat API


@CHAT.get("/status")
def status(indexer: Task) -> str:
    return str(indexer.snapshot().status)


@CHAT.get("/time/start")
def start_time(indexer: Task) -> str | None:
    started = indexer.snapshot().started_at
    if started is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(started))


@CHAT.get("/offsets/current")
def current_offsets(indexer: Task) -> dict[str, int]:
    return offsets_json(indexer.snapshot().current)


@CHAT.get("/offsets/end")
def end_offsets(indexer: Task) -> dict[str, int]:
    return offsets_json(indexer.snapshot().end)


@CHAT.post("/offsets/end")
def set_end_offsets(
    indexer: Task, body: dict[str, int], finish: bool = Query(True)
) -> dict[str, int]:
    try:
        offsets = offsets_from_json(body)
    except ValueError:
        raise ControlError(400, "end offsets are a map of partition to offset") from None
    return offsets_json(indexer.set_end_offsets(offsets, finish))


@CHAT.post("/pause", response_model=None)
def pause(indexer: Task) -> JSONResponse | dict[str, int]:
    offsets = indexer.pause(PAUSE_WAIT_SECONDS)
    if offsets is None:
        return JSONResponse(status_code=202, content={"status": "pausing"})
    return offsets_json(offsets)


@CHAT.post("/resume")
def resume(indexer: Task) -> dict[str, str]:
    indexer.resume()
    return {"status": str(indexer.snapshot().status)}


@CHAT.get("/checkpoints")
def checkpoints(indexer: Task) -> dict[str, dict[str, int]]:
    return indexer.checkpoints()


@CHAT.get("/rowStats")
def row_stats(indexer: Task) -> dict[str, Any]:
    return indexer.row_stats()


@CHAT.get("/metrics")
def metrics(indexer: Task) -> dict[str, Any]:
    """Row counts, task counters (persists, handoffs, pauses) and the current offsets in
    one answer: what a supervisor's loop asks every running task on every pass."""
    return indexer.snapshot().metrics().model_dump()


@CHAT.get("/unparseableEvents")
def unparseable_events(indexer: Task) -> dict[str, Any]:
    return {"buildSegments": indexer.snapshot().samples}


@CHAT.get("/rows/held")
def held_rows(indexer: Task, since: str = Query("{}", max_length=100_000)) -> dict[str, object]:
    """The Parquet files of the rows held past the committed offsets `since` (a JSON map of
    partition to offset), and the offsets they cover: what the overlord's SQL API reads with
    the published table. 409 when a publish has moved past `since`: read them again."""
    try:
        offsets = offsets_from_json(json.loads(since))
    except (ValueError, TypeError, AttributeError):
        raise ControlError(400, "since is a JSON map of partition to offset") from None
    try:
        return indexer.held(offsets)
    except Gone as exc:
        raise ControlError(409, str(exc)) from None


@CHAT.get("/rows/held/file")
def held_file(indexer: Task, path: str = Query(..., max_length=4096)) -> Response:
    """One of the files `rows/held` named, as an Arrow IPC stream: for an overlord on another
    machine than this task's work directory. 409 when it is not a file of the rows held now
    (published since: read again)."""
    try:
        return Response(indexer.held_file(path), media_type=ARROW_STREAM)
    except Gone as exc:
        raise ControlError(409, str(exc)) from None


@CHAT.post("/stop")
def stop(indexer: Task) -> dict[str, str]:
    indexer.stop()
    return {"status": "stopping"}


def create_control_app(find: Callable[[str], TaskControl | None]) -> FastAPI:
    """The chat API of every task `find` knows (None: no such task here, a 403 as for a wrong
    token). A task process serves its one task with it, a shared application all of its
    tasks: one app for all, where an app of its own cost each new task ~17 ms of the
    interpreter (its routes, then its middleware on its first call) and a host's burst of
    fifty new tasks most of a second, while their first batches waited."""
    app = FastAPI(title="Sluicegate tasks", openapi_url=None, docs_url=None)

    @app.exception_handler(ControlError)
    async def control_error(_: Request, exc: ControlError) -> JSONResponse:
        return _error(exc.status_code, exc.message)

    app.state.find = find
    app.include_router(CHAT)
    return app


__all__ = ["EpochFence", "TaskControl", "create_control_app"]
