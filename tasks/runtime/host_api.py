"""The shared application's one port (tasks/runtime/shared.py): its own API for the runner that
started it (assign, list, kill, forget; tasks/host_protocol.py), and the chat API of every task
it runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from fastapi import FastAPI, Header, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from tasks.host_protocol import (
    API,
    Assigned,
    Forgotten,
    HostTasks,
    Killed,
)
from tasks.protocol import TOKEN_HEADER
from tasks.runtime.assignment import error, read_assignment
from tasks.runtime.assignment import refused as token_refused
from tasks.runtime.control import create_control_app

if TYPE_CHECKING:
    from tasks.runtime.shared import TaskHost

CHAT_PREFIX = "/druid/worker/v1/chat/"
# Every task's chat calls run on the API's threads, and a pause holds one while the task ends
# its batch (up to PAUSE_WAIT_SECONDS, tasks/runtime/control.py): with the default 40, a
# hundred tasks' metrics and offsets calls queued behind a few dozen pauses and the overlord's
# probes timed out.
CHAT_THREADS = 512


class Duplicate(ValueError):
    """The task is assigned here already."""


class Refused(ValueError):
    """The task cannot be started here."""


@asynccontextmanager
async def _chat_threads(_app: FastAPI) -> AsyncIterator[None]:
    anyio.to_thread.current_default_thread_limiter().total_tokens = CHAT_THREADS
    yield


def create_host_api(host: TaskHost, token: str) -> FastAPI:
    app = FastAPI(
        title="Sluicegate task host application",
        openapi_url=None,
        docs_url=None,
        lifespan=_chat_threads,
    )

    def refused(given: str | None) -> JSONResponse | None:
        return token_refused(given, token, "missing or wrong host token")

    @app.get(f"{API}/tasks", response_model=None)
    def tasks(
        given: str | None = Header(default=None, alias=TOKEN_HEADER),
    ) -> JSONResponse | dict[str, Any]:
        denied = refused(given)
        if denied is not None:
            return denied
        spark = "STARTING" if not host.spark_ready.is_set() else host.spark_error or "READY"
        return HostTasks(spark=spark, tasks=host.views()).model_dump()

    @app.post(f"{API}/tasks", response_model=None)
    async def assign(
        request: Request, given: str | None = Header(default=None, alias=TOKEN_HEADER)
    ) -> JSONResponse | dict[str, str]:
        denied = refused(given)
        if denied is not None:
            return denied
        read = await read_assignment(request)
        if isinstance(read, JSONResponse):
            return read
        if "overlord" in read.model_fields_set and read.overlord is None:
            return error(400, "overlord: an http:// or https:// URL")
        task, overlord = read.payload, read.overlord or host.args.overlord
        try:  # off the event loop: building a task's run takes a while
            await run_in_threadpool(host.assign, task, read.token, overlord)
        except Duplicate as exc:
            return error(409, str(exc))
        except Refused as exc:
            return error(400, str(exc))
        return Assigned(task=task.id).model_dump()

    @app.post(f"{API}/tasks/{{task_id}}/kill", response_model=None)
    def kill(
        task_id: str, given: str | None = Header(default=None, alias=TOKEN_HEADER)
    ) -> JSONResponse | dict[str, bool]:
        denied = refused(given)
        if denied is not None:
            return denied
        return Killed(killed=host.kill(task_id)).model_dump()

    @app.delete(f"{API}/tasks/{{task_id}}", response_model=None)
    def forget(
        task_id: str, given: str | None = Header(default=None, alias=TOKEN_HEADER)
    ) -> JSONResponse | dict[str, bool]:
        denied = refused(given)
        if denied is not None:
            return denied
        return Forgotten(forgotten=host.forget(task_id)).model_dump()

    return app


class Router:
    """The one port's ASGI app: the chat API of every task of the host (one app, which finds
    the task a call names), the rest to the host's own API."""

    def __init__(self, host: TaskHost, api: FastAPI) -> None:
        self.api = api
        self.chat = create_control_app(host.chat_control)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        await (self.chat if path.startswith(CHAT_PREFIX) else self.api)(scope, receive, send)
