"""What every API command shares: the service URL, the output format, reading a JSON file,
and asking before a destructive change."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from supervisor.cli.client import DEFAULT_URL, EXIT_USAGE, CliError, ServiceClient, credentials
from supervisor.cli.output import emit_json

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    def __init__(self, url: str, output: str, user: str | None = None) -> None:
        self.client = ServiceClient(url, auth=credentials(user))
        self.output = output

    @property
    def json(self) -> bool:
        return self.output == "json"

    def done(self, result: Any, message: str) -> None:
        """A change's outcome: the service's answer with -o json, else one line for people."""
        if self.json:
            emit_json(result)
        else:
            click.echo(message)


pass_context = click.make_pass_decorator(Context)


def api_options(group: F) -> F:
    """--url, --user and --output on a command group; the group's commands get a Context."""
    group = click.option(
        "--user",
        "-u",
        envvar="SLUICEGATE_USER",
        default=None,
        help="Log in as this user (or SLUICEGATE_USER); the password comes from "
        "SLUICEGATE_PASSWORD or is asked for. SLUICEGATE_TOKEN logs in with an API token.",
    )(group)
    group = click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="table for people, json for scripts.",
    )(group)
    return click.option(
        "--url",
        envvar="SLUICEGATE_URL",
        default=DEFAULT_URL,
        show_default=True,
        help="The service's base URL (or SLUICEGATE_URL).",
    )(group)


def api_group(name: str, doc: str) -> click.Group:
    """A command group talking to the service: --url and --output, and a Context for its
    commands."""

    @click.group(name, help=doc)
    @api_options
    @click.pass_context
    def group(ctx: click.Context, url: str, output: str, user: str | None) -> None:
        ctx.obj = Context(url, output, user)

    return group


def read_json_file(path: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    except UnicodeDecodeError:
        raise CliError(f"{path} is not UTF-8 text", EXIT_USAGE) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            EXIT_USAGE,
        ) from None


def confirm(question: str, yes: bool) -> None:
    """Ask before a destructive change unless --yes; 'no' (or no terminal) aborts."""
    if yes:
        return
    try:
        click.confirm(question, abort=True, err=True)
    except OSError:  # no input to read an answer from
        click.echo(err=True)
        raise click.Abort from None


yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
