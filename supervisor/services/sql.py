"""A Druid SQL request carried out: its body checked (every problem a 400 naming the field),
its SQL translated (supervisor/sql/dialect.py), its tables checked and opened on a session of
the metadata DB (sql_catalog.py), which is closed before DuckDB runs the query, and the rows
written in the format asked for (supervisor/sql/results.py)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from sqlalchemy.orm import Session
from sqlglot import exp

from supervisor.services.sql_catalog import Catalog
from supervisor.settings import Settings
from supervisor.sql.dialect import Translated, statements, translate
from supervisor.sql.engine import SqlEngine
from supervisor.sql.errors import SqlError, invalid, too_big
from supervisor.sql.results import FORMATS, check_format, render
from supervisor.sql.zones import zone

QUERY_ID = re.compile(r"[A-Za-z0-9._:\-]{1,255}")
ATTEMPTS = 2  # a table that changed under a query (a compaction's or kill's files gone): once more


@dataclass
class SqlRequest:
    query: str
    result_format: str = "object"
    header: bool = False
    types_header: bool = False
    sql_types_header: bool = False
    context: dict[str, Any] = field(default_factory=dict)
    parameters: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SqlAnswer:
    query_id: str
    media_type: str
    header: bool
    body: list[str]
    lacking: list[dict[str, Any]] = field(default_factory=list)  # task groups not read


def parse_request(body: Any) -> SqlRequest:
    """Druid's SQL request object."""
    if not isinstance(body, dict):
        raise invalid("body: a JSON object with a query", field="body")
    known = {"query", "resultFormat", "header", "typesHeader", "sqlTypesHeader"}
    known |= {"context", "parameters"}
    unknown = sorted(set(body) - known)
    if unknown:
        raise invalid(f"{unknown[0]}: not a field of Druid's SQL request", field=unknown[0])
    query = body.get("query")
    if not isinstance(query, str):
        raise invalid("query: an SQL string is required", field="query")
    flags = {}
    for name in ("header", "typesHeader", "sqlTypesHeader"):
        value = body.get(name, False)
        if not isinstance(value, bool):
            raise invalid(f"{name}: true or false", field=name)
        flags[name] = value
    if (flags["typesHeader"] or flags["sqlTypesHeader"]) and not flags["header"]:
        raise invalid("typesHeader and sqlTypesHeader need header: true", field="header")
    context = body.get("context") or {}
    if not isinstance(context, dict):
        raise invalid("context: a JSON object", field="context")
    parameters = body.get("parameters") or []
    if not isinstance(parameters, list):
        raise invalid("parameters: a list of {type, value} objects", field="parameters")
    return SqlRequest(
        query=query,
        result_format=check_format(body.get("resultFormat", "object")),
        header=flags["header"],
        types_header=flags["typesHeader"],
        sql_types_header=flags["sqlTypesHeader"],
        context=context,
        parameters=parameters,
    )


def query_id_of(context: dict[str, Any]) -> str:
    given = context.get("sqlQueryId")
    if given is None:
        return str(uuid.uuid4())
    if not isinstance(given, str) or not QUERY_ID.fullmatch(given):
        raise invalid(
            "context.sqlQueryId: 1-255 letters, digits and . _ : -", field="context.sqlQueryId"
        )
    return given


def _timeout_ms(context: dict[str, Any], settings: Settings) -> int:
    given = context.get("timeout")
    if given is None:
        return min(settings.sql_timeout_ms, settings.sql_max_timeout_ms)
    if isinstance(given, bool) or not isinstance(given, int) or given <= 0:
        raise invalid("context.timeout: a positive number of milliseconds", field="context.timeout")
    if given > settings.sql_max_timeout_ms:
        raise invalid(
            f"context.timeout: at most {settings.sql_max_timeout_ms} ms here (SQL_MAX_TIMEOUT_MS)",
            field="context.timeout",
        )
    return given


def _outer_limit(tree: exp.Query, context: dict[str, Any]) -> exp.Expr:
    """Druid's sqlOuterLimit: at most this many rows, whatever the query's own LIMIT."""
    given = context.get("sqlOuterLimit")
    if given is None:
        return tree
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        raise invalid("context.sqlOuterLimit: a whole number", field="context.sqlOuterLimit")
    return exp.select("*").from_(tree.subquery("sg_outer")).limit(given)


def run(
    request: SqlRequest,
    engine: SqlEngine,
    sessions: Callable[[], Session],
    catalog: Callable[[Session], Catalog],
    settings: Settings,
    owner: str = "",
) -> SqlAnswer:
    """The request's answer; a SqlError for any problem with it. The query holds one of the
    engine's slots from its parse on (`SqlEngine.admit`)."""
    with engine.admit():
        set_context, tree = statements(request.query)
        context = {**request.context, **set_context}  # SET statements win, as in Druid
        query_id = query_id_of(context)
        try:
            where = zone(str(context.get("sqlTimeZone", "UTC")))
            translated = translate(_outer_limit(tree, context), where, request.parameters)
            timeout_ms = _timeout_ms(context, settings)
            for attempt in range(ATTEMPTS):
                try:
                    last = attempt + 1 == ATTEMPTS
                    sources, lacking = _sources(sessions, catalog, translated, last)
                    result = engine.run(
                        query_id,
                        translated.sql,
                        sources,
                        where,
                        timeout_ms,
                        settings.sql_max_rows,
                        owner,
                    )
                    break
                except SqlError as exc:
                    if exc.status != 503 or attempt + 1 == ATTEMPTS:
                        raise
            body = _bounded(
                render(
                    result,
                    where,
                    request.result_format,
                    request.header,
                    request.types_header,
                    request.sql_types_header,
                ),
                settings.sql_max_result_mb * 2**20,
            )
        except SqlError as exc:
            exc.context.setdefault("sqlQueryId", query_id)
            raise
        return SqlAnswer(query_id, FORMATS[request.result_format], request.header, body, lacking)


def _bounded(chunks: Iterable[str], most: int) -> list[str]:
    """The answer's text, refused (400) once it passes `most` characters: a few rows of long
    strings (LPAD's, REPLACE's) can weigh what the row bound never sees."""
    body, size = [], 0
    for chunk in chunks:
        size += len(chunk)
        if size > most:
            raise too_big(
                f"the answer is longer than {most // 2**20} MiB: select fewer or shorter values"
            )
        body.append(chunk)
    return body


def _sources(
    sessions: Callable[[], Session],
    catalog: Callable[[Session], Catalog],
    translated: Translated,
    last: bool = True,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The query's tables, opened on a session of their own (closed before the query runs),
    and the task groups whose held rows are not among them. A file a compaction or kill
    removed since the table was listed, or a publish since the committed offsets were read,
    is a 503 (tried again); on the `last` try, a publish makes the groups it moved lacking."""
    with sessions() as session:
        tables = catalog(session)
        tables.tolerant = last
        for ref in translated.tables.values():
            tables.check(ref)  # every refusal before any table is opened
        try:
            found = {name: tables.source(ref) for name, ref in translated.tables.items()}
            return found, tables.lacking
        except (OSError, pa.ArrowException) as exc:
            raise SqlError(
                503, "unavailable", "RUNTIME_FAILURE", f"a table changed under the query: {exc}"
            ) from None
