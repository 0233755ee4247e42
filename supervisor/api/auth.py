"""Authentication of every request, and the permission checks routes make.

With `SLUICEGATE_AUTH=none` (the default; loopback only unless the operator says otherwise)
every request is ANONYMOUS and may do everything. With `basic`, every request but the
service's health, the console's static files and tasks' actions (which carry their own
task's token) needs HTTP Basic or a Bearer API token: 401 without, 403 for an identity whose
roles lack the permission. Routes about a supervisor or a task check its datasource, as
Druid does, before they say whether it exists; listings show only what the identity may
read."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.api.context import OWNERS_S, AppContext, context
from supervisor.errors import ForbiddenError, NotFoundError
from supervisor.model.access import ANONYMOUS, Action, Identity, ResourceType
from supervisor.services import lookups
from supervisor.services.authentication import Authenticator, basic_user
from supervisor.services.login_limits import retry_after

log = logging.getLogger(__name__)
# Paths any request may reach: liveness, the console's page and scripts (they hold no
# data; the console logs in for its API calls), and tasks' actions (their task's token).
OPEN_PATHS = ("/status/health", "/console", "/druid/indexer/v1/action")
CONSOLE_HEADER = "x-sluicegate-console"  # the console's calls: no browser login dialog


class Authentication:
    def __init__(self, app: ASGIApp, context: AppContext) -> None:
        self.app = app
        self.context = context

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        identity: Identity | None = ANONYMOUS
        path = scope["path"]
        authenticator = self.context.authenticator  # None: authentication is off
        if authenticator is not None and not (
            path == "/" or any(path == p or path.startswith(p + "/") for p in OPEN_PATHS)
        ):
            headers = {k.lower(): v.decode("latin-1") for k, v in scope["headers"]}
            authorization = headers.get(b"authorization")
            identity = authenticator.known(authorization)  # in memory: no hop to a thread
            console = CONSOLE_HEADER.encode() in headers
            if identity is None and authorization:
                checked = await _checked(authenticator, authorization, console, scope)
                if isinstance(checked, JSONResponse):  # 401 or 429
                    await checked(scope, receive, send)
                    return
                identity = checked
            if identity is None:
                await _unauthorized(console)(scope, receive, send)
                return
        scope.setdefault("state", {})["identity"] = identity
        await self.app(scope, receive, send)


async def _checked(
    authenticator: Authenticator, authorization: str, console: bool, scope: Scope
) -> Identity | JSONResponse:
    """Credentials not in memory, checked within the login limits: a 429 with Retry-After
    when the client's address (or the user it names) failed too often lately, before any
    hashing; else the identity, or a 401 counted as a failure."""
    client = scope.get("client")
    address = str(client[0]) if client else ""
    user = basic_user(authorization)
    wait = authenticator.limits.wait_s(address, user)
    if wait > 0:
        return JSONResponse(
            status_code=429,
            content={"error": "Authorization: too many wrong credentials lately; try later"},
            headers={"Retry-After": retry_after(wait)},
        )
    identity = await run_in_threadpool(authenticator.identify, authorization)
    if identity is None:
        authenticator.limits.failed(address, user)
        log.warning("wrong credentials from %s for %s", address, user or "a token")
        return _unauthorized(console)
    if user is not None:
        authenticator.limits.succeeded(address, user)
    return identity


def _unauthorized(console: bool) -> JSONResponse:
    headers = {} if console else {"WWW-Authenticate": 'Basic realm="sluicegate", charset="UTF-8"'}
    return JSONResponse(
        status_code=401,
        content={"error": "Authorization: send a user's password (Basic) or an API token (Bearer)"},
        headers=headers,
    )


def identity(request: Request) -> Identity:
    found = request.scope.get("state", {}).get("identity")
    return found if isinstance(found, Identity) else ANONYMOUS


def require(who: Identity, kind: ResourceType, name: str, action: Action) -> None:
    if not who.allows(kind, name, action):
        who_text = who.name or "this identity"
        raise ForbiddenError(f"{who_text} may not {action} {kind} '{name}'")


def require_datasource(request: Request, datasource: str, action: Action) -> None:
    """The caller may do `action` on the datasource (ForbiddenError, a 403, otherwise)."""
    require(identity(request), ResourceType.DATASOURCE, datasource, action)


def needs(kind: ResourceType, name: str, action: Action) -> Callable[[Request], Awaitable[None]]:
    """A route dependency: the identity holds this permission."""

    async def check(request: Request) -> None:
        require(identity(request), kind, name, action)

    return check


def on_supervisor(action: Action) -> Callable[[Request, str], Awaitable[None]]:
    """A route dependency: the identity may `action` every datasource the supervisor in the
    path has had (its history holds the older ones' specs). One it may not act on is a 403
    whether or not it exists, unless its id is a datasource the identity may act on (a
    supervisor is named for its datasource by default): then 404 for one it cannot see as for
    one that is not there. So the answer to a supervisor out of reach tells nothing of it; and
    one made between this check and the route's work is not acted on."""

    async def check(request: Request, supervisor_id: str) -> None:
        def find(session: Session) -> list[str]:
            return lookups.supervisor_datasources(session, supervisor_id)

        await _may(
            request,
            action,
            f"s/{supervisor_id}",
            find,
            OWNERS_S,
            Out(
                f"[{supervisor_id}] does not exist",
                f"supervisor '{supervisor_id}'",
                lambda who: who.allows(ResourceType.DATASOURCE, supervisor_id, action),
            ),
        )

    return check


def on_task(action: Action) -> Callable[[Request, str], Awaitable[None]]:
    """A route dependency: the identity may `action` the datasource of the task in the path.
    A task out of reach, there or not, is a 403; a 404 only for an identity that may act on
    every datasource (it would see the task if there were one)."""

    async def check(request: Request, task_id: str) -> None:
        def find(session: Session) -> list[str]:
            return lookups.task_datasources(session, task_id)

        await _may(
            request,
            action,
            f"t/{task_id}",
            find,
            None,
            Out(
                f"Cannot find any task with id: [{task_id}]",
                f"task '{task_id}'",
                lambda who: who.allows_every(ResourceType.DATASOURCE, action),
            ),
        )

    return check


@dataclass(frozen=True)
class Out:
    """What a request answers for a resource it cannot act on: its 404's words, the name its
    403 gives it, and whether an identity could act on it if it existed (then a 404)."""

    missing: str
    name: str
    could: Callable[[Identity], bool]


async def _may(
    request: Request,
    action: Action,
    key: str,
    find: Callable[[Session], list[str]],
    keep_s: float | None,
    out: Out,
) -> None:
    """The identity may `action` every datasource `find` names; else `out` answers."""
    who = identity(request)
    if not who.authenticated:  # authentication off: the route answers what is there
        return
    datasources = await _owners(request, key, find, keep_s)
    if datasources and all(who.allows(ResourceType.DATASOURCE, d, action) for d in datasources):
        return
    if out.could(who):
        raise NotFoundError(out.missing)
    raise ForbiddenError(f"{who.name or 'this identity'} may not {action} {out.name}")


async def _owners(
    request: Request, key: str, find: Callable[[Session], list[str]], keep_s: float | None
) -> tuple[str, ...]:
    """What `find` answers, from memory when it was found lately (`keep_s`; None: for good):
    a request that passes the check costs no database read and no hop to a thread."""
    app = context(request)
    now = time.monotonic()
    hit = app.owners.get(key)
    if hit is not None and (keep_s is None or hit[1] > now):
        return hit[0]
    sessions = app.sessions

    def run() -> tuple[str, ...]:
        with sessions() as session:
            return tuple(find(session))

    found = await run_in_threadpool(run)
    if found:  # never a miss: a supervisor made a moment later must be found
        app.owners.put(key, (found, now + (keep_s or 0.0)))
    return found


def forget_supervisor(request: Request, supervisor_id: str) -> None:
    """After a spec of the supervisor was written here: its datasources are read again."""
    context(request).owners.discard(f"s/{supervisor_id}")


def may_read(request: Request) -> Callable[[str], bool]:
    """Whether the identity may read a datasource: for filtering listings."""
    who = identity(request)
    return lambda datasource: who.allows(ResourceType.DATASOURCE, datasource, Action.READ)
