"""Followers redirect writes to the leader, as Druid's overlords do: a request that is not a
read (GET, HEAD, OPTIONS) under /druid/indexer/v1 or /druid/coordinator/v1 gets 307 Temporary
Redirect to the same path and query on the leader, which keeps the method and body. With no
leader (the lease ran out and no overlord has taken it yet) it gets 503, to be tried again."""

from __future__ import annotations

from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from supervisor.api.context import AppContext

PREFIXES = ("/druid/indexer/v1", "/druid/coordinator/v1")
READS = frozenset({"GET", "HEAD", "OPTIONS"})


class FollowerRedirect:
    def __init__(self, app: ASGIApp, context: AppContext) -> None:
        self.app = app
        self.context = context

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] in READS
            or not scope["path"].startswith(PREFIXES)
            or self.context.leading
        ):
            await self.app(scope, receive, send)
            return
        leader = await run_in_threadpool(self.context.leader_url)
        response: Response
        if leader is None or leader.rstrip("/") == self.context.settings.advertised_url():
            # none leads; or the lease is still a predecessor's at this very URL (restarted
            # within its lease): a redirect would come back here
            response = JSONResponse(
                status_code=503,
                content={"error": "no overlord leads the metadata DB right now; try again"},
                headers={"Retry-After": "1"},
            )
        else:
            raw = scope.get("raw_path")  # as sent (still percent-encoded)
            path = raw.decode("latin-1") if raw else scope["path"]
            query = scope.get("query_string", b"").decode("latin-1")
            location = leader.rstrip("/") + path + (f"?{query}" if query else "")
            response = Response(status_code=307, headers={"Location": location})
        await response(scope, receive, send)
