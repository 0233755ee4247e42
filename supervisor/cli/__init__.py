"""The `sluicegate` command line. Errors are one line on stderr and a non-zero exit:
1 the service refused the request (or `health`: unhealthy), 2 bad usage or a bad local file,
3 the service is unreachable, 130 aborted (a confirmation answered no, or Ctrl-C).
"""

from __future__ import annotations

import sys

import click

from supervisor.cli.client import CliError, ServiceError, exit_code
from supervisor.cli.completion import completion
from supervisor.cli.datasources import compaction_group, rules_group
from supervisor.cli.dev import (
    kafka_local,
    postgres_local,
    quickstart,
    registry_local,
    resolve_jars,
    s3_local,
    spark_local,
)
from supervisor.cli.serve import serve
from supervisor.cli.sql import sql_command
from supervisor.cli.supervisor_control import (
    handoff,
    reset,
    reset_offsets,
    resume_all,
    suspend_all,
    terminate_all,
)
from supervisor.cli.supervisor_status import health, stats, status
from supervisor.cli.supervisors import supervisor_group
from supervisor.cli.tasks import segments_group, task_group, workers_group
from supervisor.cli.worker import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sluicegate")
def cli() -> None:
    """Sluicegate: Kafka topics into Parquet segments, exactly once."""


cli.add_command(serve)
cli.add_command(kafka_local)
cli.add_command(postgres_local)
cli.add_command(spark_local)
cli.add_command(s3_local)
cli.add_command(registry_local)
cli.add_command(worker)
cli.add_command(quickstart)
cli.add_command(resolve_jars)
cli.add_command(supervisor_group)
cli.add_command(task_group)
cli.add_command(segments_group)  # with datasources' mark-unused, mark-used, drop, kill
cli.add_command(rules_group)
cli.add_command(compaction_group)
cli.add_command(workers_group)
cli.add_command(completion)
cli.add_command(sql_command)
for command in (status, health, stats, handoff, reset, reset_offsets):
    supervisor_group.add_command(command)
for command in (suspend_all, resume_all, terminate_all):
    supervisor_group.add_command(command)


def main(argv: list[str] | None = None) -> int:
    try:
        result = cli.main(args=argv, prog_name="sluicegate", standalone_mode=False)
    except CliError as exc:
        click.echo(f"error: {exc.message}", err=True)
        return exc.exit_code
    except ServiceError as exc:
        click.echo(f"error: {exc.message}", err=True)
        return exit_code(exc)
    except click.UsageError as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        return exc.exit_code
    except click.Abort:
        click.echo("error: aborted", err=True)
        return 130
    except KeyboardInterrupt:
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
