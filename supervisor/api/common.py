"""What every route shares: the DB session per request, the JSON body reader, the actor, and
waking the pass that carries out an intent."""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from supervisor.api.auth import identity
from supervisor.api.context import context
from supervisor.api.guard import json_media_type
from supervisor.errors import BadRequestError, DomainError, PayloadTooLargeError, Raced
from supervisor.services import lookups
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
    wake-up and a GIL hand-over, which were most of a request's CPU time.

    Work that raced another request on the same rows (Raced) is run again on what that one
    wrote, a few times."""
    sessions = context(request).sessions

    def run() -> T:
        for attempt in range(RACE_ATTEMPTS):
            with sessions() as session:  # closing rolls back whatever was not committed
                try:
                    result = work(session)
                    session.commit()
                except Raced:
                    if attempt + 1 == RACE_ATTEMPTS:
                        raise
                    time.sleep(random.uniform(0, 0.01 * (attempt + 1)))  # the racers spread out
                    continue
            if then is not None:
                then(result)
            return result
        raise AssertionError("unreachable")

    return await run_in_threadpool(run)


RACE_ATTEMPTS = 10
MAX_DEPTH = 64  # objects and arrays nested deeper than this are refused
_MAX_INT = 2**63 - 1  # numbers are Java longs in Druid's specs


class UnsupportedMediaTypeError(DomainError):
    status_code = 415


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > 19 or not -_MAX_INT - 1 <= (value := int(text)) <= _MAX_INT:
        raise ValueError(
            f"the number {text[:24]}{'...' if len(text) > 24 else ''} does not fit in 64 bits"
        )
    return value


def _decimal(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:24]} is out of range")
    return value


def _constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON (numbers are finite)")


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > MAX_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def parse_json(data: bytes) -> Any:
    """A request body as JSON: UTF-8, finite numbers that fit in 64 bits, nested at most
    MAX_DEPTH deep; anything else a 400 naming the body."""
    if not data.strip():
        raise BadRequestError("body: is empty; send a JSON document", field="body")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequestError("body: is not UTF-8 text", field="body") from None
    try:
        value = json.loads(text, parse_int=_integer, parse_float=_decimal, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise BadRequestError(
            f"body: malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            field="body",
        ) from None
    except ValueError as exc:
        raise BadRequestError(f"body: {exc}", field="body") from None
    except RecursionError:
        value = None
        deep = True
    else:
        deep = _too_deep(value)
    if deep:
        raise BadRequestError(f"body: nested deeper than {MAX_DEPTH} levels", field="body")
    return value


async def json_body(request: Request) -> Any:
    """The body of a write: JSON (any other Content-Type is a 415, as in Druid: a web page
    can send text/plain to any address without asking, never application/json), at most the
    configured size (413)."""
    if not json_media_type(request.headers.get("content-type")):
        raise UnsupportedMediaTypeError(
            "Content-Type: must be application/json", field="Content-Type"
        )
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
    return parse_json(b"".join(chunks))


async def actor(request: Request) -> Actor:
    """Who asks: the authenticated identity (with authentication off, the X-Druid-Author
    header names the author), with the X-Druid-Comment and the client's address."""
    client = request.client
    who = identity(request)
    return Actor(
        author=who.name if who.authenticated else request.headers.get("x-druid-author", "")[:255],
        comment=request.headers.get("x-druid-comment", "")[:4096],
        remote_address=client.host if client else None,
        identity=who,
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
        lookups.require_epoch(session, epoch)
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
