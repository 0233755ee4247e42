"""Druid's SQL API: POST /druid/v2/sql (a query, answered in Druid's result formats and error
shape) and DELETE /druid/v2/sql/{sqlQueryId} (cancel a running one).

The body must be JSON: a text/plain body (which Druid also takes) is refused with a 415, since
a web page may send text/plain to any address without the browser asking first, and a query
is a read its page would then see through the user's cookies."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from sqlalchemy.orm import Session

from supervisor.api.auth import identity, may_read
from supervisor.api.common import json_body
from supervisor.api.context import AppContext, context
from supervisor.errors import DomainError
from supervisor.model.access import Action, ResourceType
from supervisor.services import sql as service
from supervisor.services.sql_catalog import Catalog, LiveReads
from supervisor.services.sql_held import HeldFiles
from supervisor.services.sql_live import ask, fetch
from supervisor.sql.engine import SqlEngine
from supervisor.sql.errors import SqlError
from supervisor.sql.results import FORMATS

router = APIRouter(prefix="/druid/v2/sql", tags=["sql"])
RESPONSE_CONTEXT = "X-Druid-Response-Context"
MAX_LACKING_NAMED = 20  # task groups named in the header (their count past it)
QUERY_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["query"],
                    "properties": {
                        "query": {"type": "string"},
                        "resultFormat": {"type": "string", "enum": list(FORMATS)},
                        "header": {"type": "boolean"},
                        "typesHeader": {"type": "boolean"},
                        "sqlTypesHeader": {"type": "boolean"},
                        "context": {"type": "object"},
                        "parameters": {"type": "array", "items": {"type": "object"}},
                    },
                }
            }
        },
    }
}


ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the rows, in the resultFormat asked for",
        "content": {kind: {} for kind in sorted(set(FORMATS.values()))},
    },
    409: {"description": "the query was cancelled (DELETE /druid/v2/sql/{sqlQueryId})"},
    504: {"description": "the query ran past its timeout (context.timeout, SQL_TIMEOUT_MS)"},
}


def engine_of(app: AppContext) -> SqlEngine:
    """The service's DuckDB, made at its first query."""
    if app.sql_engine is None:
        settings = app.settings
        app.sql_engine = SqlEngine(
            settings.sql_threads, settings.sql_memory_mb, settings.sql_max_concurrent
        )
    return app.sql_engine


def held_files_of(app: AppContext) -> HeldFiles:
    """The held files the service keeps read (sql_held.py), made at its first query."""
    if app.held_files is None:
        app.held_files = HeldFiles(app.settings.sql_held_cache_mb * 1024 * 1024)
    return app.held_files


def _error(exc: SqlError, query_id: str | None = None) -> JSONResponse:
    headers = {"X-Druid-SQL-Query-Id": query_id} if query_id else None
    return JSONResponse(status_code=exc.status, content=exc.body(), headers=headers)


async def _query(request: Request) -> Response:
    app = context(request)
    try:
        parsed = service.parse_request(await json_body(request))
    except DomainError as exc:  # Druid's shape, which Druid's clients read, for these too
        return _error(SqlError(exc.status_code, "invalidInput", "INVALID_INPUT", exc.message))
    except SqlError as exc:
        return _error(exc)
    readable = may_read(request)
    status_of = app.statuses_of
    now = app.clock()
    settings = app.settings
    lake, storage = app.tables, settings.storage()
    timeout_s = settings.sql_live_timeout_ms / 1000
    live = (
        LiveReads(ask(timeout_s), fetch(timeout_s), held_files_of(app), settings.sql_held_over_chat)
        if settings.sql_live_rows
        else None
    )

    def catalog(session: Session) -> Catalog:
        return Catalog(session, lake, storage, readable, status_of(session), now, live)

    try:
        answer = await run_in_threadpool(
            service.run,
            parsed,
            engine_of(app),
            app.sessions,
            catalog,
            settings,
            identity(request).name,
        )
    except SqlError as exc:
        return _error(exc, exc.context.get("sqlQueryId"))
    headers = {"X-Druid-SQL-Query-Id": answer.query_id}
    if answer.header:
        headers["X-Druid-SQL-Header-Included"] = "yes"
    if answer.lacking:  # Druid's response context: what the answer could not include
        lacking: dict[str, Any] = {"missingTaskGroups": answer.lacking[:MAX_LACKING_NAMED]}
        if len(answer.lacking) > MAX_LACKING_NAMED:
            lacking["missingTaskGroupCount"] = len(answer.lacking)
        headers[RESPONSE_CONTEXT] = json.dumps(lacking, separators=(",", ":"))
    return Response("".join(answer.body), media_type=answer.media_type, headers=headers)


@router.post(
    "",
    summary="Run a Druid SQL query over the tables, the rows tasks hold, and the sys tables",
    openapi_extra=QUERY_BODY,
    response_class=Response,
    responses=ANSWERS,
)
async def query(request: Request) -> Response:
    return await _query(request)


@router.post("/", include_in_schema=False, response_class=Response)
async def query_slash(request: Request) -> Response:
    """pydruid posts to /druid/v2/sql/."""
    return await _query(request)


@router.delete(
    "/{sql_query_id}",
    summary="Cancel a running query (its asker may, or an identity with STATE WRITE)",
    status_code=202,
    response_class=Response,
    responses={202: {"description": "the query is being cancelled"}},
)
async def cancel(sql_query_id: str, request: Request) -> Response:
    app = context(request)
    engine = engine_of(app)
    who = identity(request)
    owner = engine.owner(sql_query_id)
    if not who.allows(ResourceType.STATE, "STATE", Action.WRITE) and (
        owner is None or owner != who.name
    ):  # whether another's query runs under that id is not told
        return _error(
            SqlError(
                403,
                "forbidden",
                "FORBIDDEN",
                f"no query of yours runs as [{sql_query_id}]: only its asker,"
                " or an identity with STATE WRITE, may cancel a query",
            )
        )
    if owner is None or not engine.cancel(sql_query_id):
        return _error(SqlError(404, "notFound", "NOT_FOUND", f"no query [{sql_query_id}] runs"))
    return Response(status_code=202)
