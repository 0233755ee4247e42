"""What every route shares: the DB session per request, the JSON body reader, the actor, and
waking the pass that carries out an intent."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from supervisor.api.context import context
from supervisor.db.lease import LeaseRepository
from supervisor.errors import BadRequestError, PayloadTooLargeError
from supervisor.services.supervisors import Actor

log = logging.getLogger(__name__)
T = TypeVar("T")
JSON_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


async def in_session(
    request: Request, work: Callable[[Session], T], then: Callable[[T], None] | None = None
) -> T:
    """Run a route's work in FastAPI's thread pool with a DB session of its own, committed (a
    write is durable before the answer is sent) and closed there; `then` runs in the same hop
    with the work's result once it is committed (waking a loop, say).

    Routes are `async def` and hand their DB work over in this one hop: a sync route with a
    sync session dependency costs FastAPI four or five hops to its thread pool per request
    (the dependency's enter and exit, the route, the answer's validation), each a thread
    wake-up and a GIL hand-over, which were most of a request's CPU time."""
    sessions = context(request).sessions

    def run() -> T:
        with sessions() as session:  # closing rolls back whatever was not committed
            result = work(session)
            session.commit()
        if then is not None:
            then(result)
        return result

    return await run_in_threadpool(run)


async def json_body(request: Request) -> Any:
    limit = context(request).settings.max_request_bytes
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


async def actor(request: Request) -> Actor:
    client = request.client
    return Actor(
        author=request.headers.get("x-druid-author", ""),
        comment=request.headers.get("x-druid-comment", ""),
        remote_address=client.host if client else None,
    )


def leader_epoch(request: Request) -> int | None:
    """The epoch this overlord leads at (NotLeading, a 503, when it does not; None when it
    keeps no lease)."""
    leader = context(request).fence.check()
    return None if leader is None else leader.epoch


def fenced(request: Request, session: Session) -> int | None:
    """Inside the transaction of a route's intent: this overlord still leads (503 otherwise,
    which the client tries again, and a follower's redirect takes to the leader)."""
    epoch = leader_epoch(request)
    if epoch is not None:
        LeaseRepository(session).require(epoch)
    return epoch


def intended(request: Request, owner: str | None) -> None:
    """After a route committed an intent for `owner`'s pass (None: it wrote none): that pass
    reads it, now. Without a running leader loop the intent waits in the DB for one."""
    manager = context(request).supervisors
    if manager is None or owner is None:
        return
    try:
        manager.intended(owner)
    except Exception as exc:  # committed: the owner's next pass, or the next leader, does it
        log.warning("%s: pass not woken for an intent: %s", owner or "(tasks)", exc)
