"""`sluicegate sql QUERY`: Spark SQL over the published segments, printed as a table."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from supervisor.cli.client import EXIT_REFUSED, CliError
from supervisor.cli.common import api_options
from supervisor.cli.output import emit_json, table


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
@click.option("--master", default="local[*]", show_default=True, help="Spark master to run on.")
@click.option(
    "--iceberg",
    is_flag=True,
    help="Read each datasource's Iceberg table through the catalog in the metadata DB "
    "(SLUICEGATE_METADATA_URL, SLUICEGATE_DEEP_STORAGE), not the service's segment list.",
)
def sql_command(
    query: str,
    url: str,
    output: str,
    max_rows: int,
    master: str,
    iceberg: bool = False,
    user: str | None = None,
) -> None:
    """Run QUERY (Spark SQL) over every datasource's published segments; each datasource is a
    view of its name, with __time a timestamp. For example:
    sluicegate sql "SELECT channel, SUM(added) FROM wikipedia GROUP BY 1 ORDER BY 2 DESC"
    """
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
    if output == "json":
        emit_json([dict(zip(columns, values, strict=True)) for values in shown], default=str)
        return
    click.echo(table(columns, shown))
    more = " (more not shown; --max-rows)" if len(rows) > max_rows else ""
    click.echo(f"({len(shown)} row{'s' if len(shown) != 1 else ''}{more})")
