"""The `sluicegate` command line. Errors are one line on stderr and a non-zero exit:
1 the service refused the request, 2 bad usage or a bad local file, 3 the service is unreachable.
"""

from __future__ import annotations

import sys

import click

from supervisor.cli.client import CliError
from supervisor.cli.dev import kafka_local, quickstart, resolve_jars, serve
from supervisor.cli.supervisors import supervisor_group


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sluicegate")
def cli() -> None:
    """Sluicegate: Kafka topics into Parquet segments, exactly once."""


cli.add_command(serve)
cli.add_command(kafka_local)
cli.add_command(quickstart)
cli.add_command(resolve_jars)
cli.add_command(supervisor_group)


def main(argv: list[str] | None = None) -> int:
    try:
        result = cli.main(args=argv, prog_name="sluicegate", standalone_mode=False)
    except CliError as exc:
        click.echo(f"error: {exc.message}", err=True)
        return exc.exit_code
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
