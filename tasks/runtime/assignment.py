"""The body that hands a task to the host's application that runs it (tasks/runtime/shared.py):
`{"payload": <the task>, "token": <its token>, ...}`, and its check of the runner's token."""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from tasks.protocol import IndexKafkaTask
from tasks.spec.names import task_id_problem


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


def refused(given: str | None, token: str, message: str) -> JSONResponse | None:
    """The 403 for a request whose token header is not `token` (compared in constant time)."""
    if not hmac.compare_digest(given or "", token):
        return error(403, message)
    return None


async def read_assignment(request: Request) -> tuple[IndexKafkaTask, dict[str, Any]] | JSONResponse:
    """The task and the whole body, checked; or the 400 that names what is wrong."""
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        return error(400, "the body is not JSON (or nests too deep)")
    if not isinstance(body, dict) or not isinstance(body.get("token"), str):
        return error(400, "token: a string is required")
    try:
        task = IndexKafkaTask.model_validate(body.get("payload"))
    except ValidationError as exc:
        return error(400, f"payload: {exc}")
    problem = task_id_problem(task.id)
    if problem is not None:
        return error(400, f"payload.id: {problem}")
    return task, body
