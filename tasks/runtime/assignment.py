"""How the host's application (tasks/runtime/shared.py) reads the body that hands it a task
(tasks/host_protocol.py Assignment), and its check of the runner's token."""

from __future__ import annotations

import hmac

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from tasks.host_protocol import Assignment
from tasks.spec.names import task_id_problem


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


def refused(given: str | None, token: str, message: str) -> JSONResponse | None:
    """The 403 for a request whose token header is not `token` (compared in constant time)."""
    if not hmac.compare_digest(given or "", token):
        return error(403, message)
    return None


async def read_assignment(request: Request) -> Assignment | JSONResponse:
    """The assignment, checked; or the 400 that names what is wrong."""
    try:
        body = await request.json()
    except (ValueError, RecursionError):
        return error(400, "the body is not JSON (or nests too deep)")
    if not isinstance(body, dict) or not isinstance(body.get("token"), str):
        return error(400, "token: a string is required")
    try:
        assignment = Assignment.model_validate(body)
    except ValidationError as exc:
        where = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else "body"
        return error(400, f"{where}: {exc}")
    problem = task_id_problem(assignment.payload.id)
    if problem is not None:
        return error(400, f"payload.id: {problem}")
    return assignment
