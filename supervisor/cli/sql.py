"""`sluicegate sql QUERY`: a Druid SQL query through the service's SQL API (/druid/v2/sql:
published rows and those tasks still hold), or, with --master or --iceberg, a Spark SQL query
over the published segments, for scans past the service's bounds; printed as a table."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from supervisor.cli.client import EXIT_REFUSED, CliError, ServiceClient, ServiceError, credentials
from supervisor.cli.common import api_options
from supervisor.cli.output import emit_json, table

SQL_API = "/druid/v2/sql"
WAIT_PAST_TIMEOUT_S = 30.0  # the HTTP wait beyond the query's own timeout
DEFAULT_WAIT_S = 330.0  # past the service's longest timeout by default (SQL_MAX_TIMEOUT_MS)

Rows = tuple[list[str], list[list[Any]], bool]  # columns, rows, whether more were left out


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr while a child (the Spark JVM) is started: it keeps
    that stdout for good, and ours is restored."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _lacking(header: str | None) -> list[str]:
    """The task groups Druid's response context names as missing from the answer."""
    try:
        context = json.loads(header) if header else {}
    except ValueError:
        return []
    named = context.get("missingTaskGroups") if isinstance(context, dict) else None
    return [str(group) for group in named] if isinstance(named, list) else []


def api_rows(query: str, url: str, user: str | None, max_rows: int, timeout_ms: int | None) -> Rows:
    """QUERY through the service's SQL API, as Druid's arrays with a header row; at most
    `max_rows` (Druid's sqlOuterLimit, one more to tell whether there are more)."""
    context: dict[str, Any] = {"sqlOuterLimit": max_rows + 1}
    wait = DEFAULT_WAIT_S
    if timeout_ms is not None:
        context["timeout"] = timeout_ms
        wait = timeout_ms / 1000 + WAIT_PAST_TIMEOUT_S
    body = {"query": query, "resultFormat": "array", "header": True, "context": context}
    try:
        with ServiceClient(url, timeout=wait, auth=credentials(user)) as client:
            response = client.exchange("POST", SQL_API, json=body)
    except ServiceError as exc:
        if exc.status_code is None:
            raise
        raise CliError(f"query failed: {exc.message}", EXIT_REFUSED) from None
    lacking = _lacking(response.headers.get("X-Druid-Response-Context"))
    if lacking:  # the answer stands; what it lacks is said beside it
        click.echo(
            f"warning: rows that tasks hold are missing for {', '.join(lacking)} "
            "(they did not answer in time); published rows are all counted",
            err=True,
        )
    answer = response.json()
    columns, rows = [str(name) for name in answer[0]], answer[1:]
    return columns, rows[:max_rows], len(rows) > max_rows


def spark_rows(
    query: str, url: str, user: str | None, max_rows: int, master: str, iceberg: bool
) -> Rows:
    """QUERY as Spark SQL on `master`, over every datasource's published segments (from the
    service at `url`) or, with `iceberg`, over its Iceberg table through the catalog."""
    from supervisor.cli.views import (
        local_session,
        published_files,
        register_tables,
        register_views,
    )

    # before Spark starts: an unreachable service fails fast
    files = {} if iceberg else published_files(url, user)
    with _stdout_to_stderr():  # the JVM's log lines must not mix with the result
        spark = local_session(master, iceberg)
    # pyspark logs a failed query's context itself; the one-line error below says it
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL + 1)
    if iceberg:
        register_tables(spark)
    else:
        register_views(spark, files)
    try:
        frame = spark.sql(query)
        rows = frame.take(max_rows + 1)
    except Exception as exc:  # Spark's AnalysisException and parse errors: the user's query
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CliError(f"query failed: {first}", EXIT_REFUSED) from None
    columns = frame.columns
    shown = [[row[i] for i in range(len(columns))] for row in rows[:max_rows]]
    return columns, shown, len(rows) > max_rows


@click.command("sql")
@click.argument("query")
@api_options
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Print at most this many rows.",
)
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=1),
    default=None,
    help="The query's timeout (Druid's context.timeout); the service's SQL_TIMEOUT_MS if unset.",
)
@click.option(
    "--master",
    default=None,
    help="Run QUERY as Spark SQL on this Spark master (local[*], spark://...) over the "
    "published segments, rather than through the service's SQL API.",
)
@click.option(
    "--iceberg",
    is_flag=True,
    help="Run QUERY as Spark SQL over each datasource's Iceberg table, through the catalog in "
    "the metadata DB (SLUICEGATE_METADATA_URL, SLUICEGATE_DEEP_STORAGE); local[*] unless "
    "--master.",
)
def sql_command(
    query: str,
    url: str,
    output: str,
    max_rows: int,
    timeout_ms: int | None = None,
    master: str | None = None,
    iceberg: bool = False,
    user: str | None = None,
) -> None:
    """Run QUERY (Druid SQL) through the service's SQL API, over every datasource's published
    rows and those its tasks hold; for example:
    sluicegate sql "SELECT channel, SUM(added) FROM wikipedia GROUP BY 1 ORDER BY 2 DESC".
    With --master or --iceberg, QUERY is Spark SQL over the published segments instead.
    """
    if master is None and not iceberg:
        columns, shown, more = api_rows(query, url, user, max_rows, timeout_ms)
    else:
        if timeout_ms is not None:
            raise click.UsageError("--timeout-ms is the SQL API's: not with --master or --iceberg")
        columns, shown, more = spark_rows(query, url, user, max_rows, master or "local[*]", iceberg)
    if output == "json":
        emit_json([dict(zip(columns, values, strict=True)) for values in shown], default=str)
        return
    click.echo(table(columns, shown))
    tail = " (more not shown; --max-rows)" if more else ""
    click.echo(f"({len(shown)} row{'s' if len(shown) != 1 else ''}{tail})")
