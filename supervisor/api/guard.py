"""What every request passes before a route: a Host this service answers to (against DNS
rebinding), no cross-site write (a web page may send a form or a text/plain POST to any
address without asking), no write that declares a body other than JSON (a form posts one even
when it is empty; body-less writes say nothing of their content), a path with no control
characters, and no exception that escapes as a reset connection (an unexpected error is a 500
whose connection stays usable; a metadata DB that cannot be reached, down or restarting, is a
503 to try again, not a 500)."""

from __future__ import annotations

import logging
from urllib.parse import unquote_plus, urlsplit

from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from supervisor.errors import UNREACHABLE, unreachable_reason
from supervisor.settings import Settings
from tasks.spec.names import has_control_characters

log = logging.getLogger(__name__)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_PATH = 2048
RETRY_AFTER_S = 2  # a metadata DB that cannot be reached: when to try again


def host_name(value: str) -> str:
    """The name of a Host header's value, without its port (IPv6 in brackets or not)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value[1:]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The names of this service a request may give as its Host (None: any)."""
    names = {name.strip().lower() for name in settings.allowed_hosts.split(",") if name.strip()}
    if "*" in names:
        return None
    names |= LOOPBACK_NAMES
    if settings.host not in ("0.0.0.0", "::", ""):
        names.add(settings.host.lower())
    advertised = urlsplit(settings.advertised_url()).hostname
    if advertised:
        names.add(advertised.lower())
    return frozenset(host_name(name) for name in names)


def json_media_type(value: str | None) -> bool:
    """application/json, or a JSON-based application/*+json type, parameters aside."""
    media = (value or "").split(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _origin(value: str) -> tuple[str, str] | None:
    """(scheme, host[:port]) of an Origin header, None for "null" or garbage."""
    parts = urlsplit(value.strip())
    return (parts.scheme.lower(), parts.netloc.lower()) if parts.scheme and parts.netloc else None


class RequestGuard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.hosts = allowed_hosts(settings)
        self.origins = {
            origin
            for text in settings.cors_origins.split(",")
            if (origin := _origin(text)) is not None
        }

    def refusal(self, scope: Scope) -> JSONResponse | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if self.hosts is not None and host_name(host) not in self.hosts:
            return _refuse(
                400,
                f"Host: '{host[:100]}' is not a name this service answers to; "
                "the operator adds it to SLUICEGATE_ALLOWED_HOSTS",
                "Host",
            )
        path = scope["path"]
        if len(path) > MAX_PATH:
            return _refuse(414, f"path: longer than {MAX_PATH} characters", "path")
        if has_control_characters(path):
            return _refuse(400, "path: holds control characters", "path")
        query = unquote_plus(scope.get("query_string", b"").decode("latin-1"))
        if has_control_characters(query):
            return _refuse(400, "query: holds control characters", "query")
        if scope["method"] not in SAFE_METHODS and self._cross_site(headers, host):
            return _refuse(
                403,
                "Origin: writes from another site's page are refused "
                "(the operator allows an origin with SLUICEGATE_CORS_ORIGINS)",
                "Origin",
            )
        declared = headers.get("content-type")
        writes = scope["method"] not in SAFE_METHODS
        if writes and declared is not None and not json_media_type(declared):
            return _refuse(415, "Content-Type: must be application/json", "Content-Type")
        return None

    def _cross_site(self, headers: dict[str, str], host: str) -> bool:
        origin_header = headers.get("origin")
        if origin_header is None:
            return headers.get("sec-fetch-site") == "cross-site"
        origin = _origin(origin_header)
        if origin is None:
            return True
        return origin[1] != host.lower() and origin not in self.origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except ClientDisconnect:  # it left while sending its body: nothing to answer
            log.info(
                "%s %s: the client left before its body arrived", scope["method"], scope["path"]
            )
            if started:
                raise
        except UNREACHABLE as exc:
            # the DB's own words stay in the log: they name its address
            reason = unreachable_reason(exc)
            log.warning("%s %s: the metadata DB: %s", scope["method"], scope["path"], reason)
            if started:
                raise
            error = _refuse(503, "the metadata DB cannot be reached right now; try again", None)
            error.headers["Retry-After"] = str(RETRY_AFTER_S)
            await error(scope, receive, send)
        except Exception as exc:
            log.exception("unexpected error on %s %s", scope["method"], scope["path"])
            if started:
                raise
            error = _refuse(500, f"internal error: {type(exc).__name__}", None)
            await error(scope, receive, send)


def _refuse(status: int, message: str, field: str | None) -> JSONResponse:
    content: dict[str, str] = {"error": message}
    if field:
        content["field"] = field
    return JSONResponse(status_code=status, content=content)
