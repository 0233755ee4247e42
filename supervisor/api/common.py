"""What every route shares: the DB session per request, the JSON body reader, the actor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from sqlalchemy.orm import Session

from supervisor.errors import BadRequestError, PayloadTooLargeError
from supervisor.services.supervisors import Actor

JSON_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


def db_session(request: Request) -> Iterator[Session]:
    """One session per request, committed before the response is sent (scope="function").

    Routes that write commit themselves before they return: FastAPI validates a sync route's
    answer in its thread pool before this runs, and an uncommitted write would hold SQLite's
    write lock meanwhile, while the writers queued behind it hold the pool's threads."""
    session: Session = request.app.state.sessions()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


async def json_body(request: Request) -> Any:
    limit: int = request.app.state.settings.max_request_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(f"body: larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(f"body: larger than the limit of {limit} bytes")
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data.strip():
        raise BadRequestError("body: is empty; send a JSON document", field="body")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequestError("body: is not UTF-8 text", field="body") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequestError(
            f"body: malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            field="body",
        ) from None


def actor(request: Request) -> Actor:
    client = request.client
    return Actor(
        author=request.headers.get("x-druid-author", ""),
        comment=request.headers.get("x-druid-comment", ""),
        remote_address=client.host if client else None,
    )
