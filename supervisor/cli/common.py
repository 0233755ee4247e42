"""What every API command shares: the service URL, the output format, reading a JSON file,
and asking before a destructive change."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from supervisor.cli.client import DEFAULT_URL, EXIT_USAGE, CliError, ServiceClient, credentials
from supervisor.cli.output import emit_json

if TYPE_CHECKING:
    from supervisor.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


class Context:
    def __init__(self, url: str, output: str, user: str | None = None) -> None:
        self.url, self.output, self.user = url, output, user
        self._client: ServiceClient | None = None

    @property
    def client(self) -> ServiceClient:
        """Made when first used: a password is asked for once, for the user finally given."""
        if self._client is None:
            self._client = ServiceClient(self.url, auth=credentials(self.user))
        return self._client

    @property
    def json(self) -> bool:
        return self.output == "json"

    def given_after(self, url: str | None, output: str | None, user: str | None) -> None:
        """The API options given after the command: they win over those before it."""
        self.url, self.output, self.user = url or self.url, output or self.output, user or self.user

    def done(self, result: Any, message: str) -> None:
        """A change's outcome: the service's answer with -o json, else one line for people."""
        if self.json:
            emit_json(result)
        else:
            click.echo(message)


pass_context = click.make_pass_decorator(Context)
API_OPTIONS = ("url", "output", "user")
API_FLAGS = ("--url", "--output", "-o", "--user", "-u")


def _api_options(on_command: bool) -> list[Callable[[F], F]]:
    """--url, --output and --user, defined once. On a group (or a lone command) they read
    their environment variables and defaults; on a group's command they are given or None,
    so that one given after the command wins and one not given leaves the group's."""

    def fallback(value: Any) -> Any:
        return None if on_command else value

    return [
        click.option(
            "--url",
            envvar=fallback("SLUICEGATE_URL"),
            default=fallback(DEFAULT_URL),
            show_default=not on_command,
            help="The service's base URL (or SLUICEGATE_URL).",
        ),
        click.option(
            "--output",
            "-o",
            type=click.Choice(["table", "json"]),
            default=fallback("table"),
            show_default=not on_command,
            help="table for people, json for scripts.",
        ),
        click.option(
            "--user",
            "-u",
            envvar=fallback("SLUICEGATE_USER"),
            default=None,
            help="Log in as this user (or SLUICEGATE_USER); the password comes from "
            "SLUICEGATE_PASSWORD or is asked for. SLUICEGATE_TOKEN logs in with an API token.",
        ),
    ]


def api_options(command: F) -> F:
    """--url, --output and --user on a command group, or on a command of its own."""
    for option in reversed(_api_options(on_command=False)):
        command = option(command)
    return command


class ApiGroup(click.Group):
    """A command group talking to the service. Its API options are accepted before the
    command (`sluicegate supervisor -o json list`) and after it (`sluicegate supervisor list
    -o json`), as kubectl, gh and docker take them; after wins."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        super().add_command(_taking_api_options(cmd), name)


def _taking_api_options(cmd: click.Command) -> click.Command:
    """The command with the API options (given or None), which it hands to the group's
    Context before it runs."""
    if cmd.callback is None or getattr(cmd, "_api_options", False):
        return cmd  # nothing to run, or taken already (a command added twice)
    clash = [o for p in cmd.params for o in p.opts if o in API_FLAGS or p.name in API_OPTIONS]
    if clash:  # a programming error: found at import
        raise TypeError(f"command {cmd.name} has its own {clash[0]}, an API option's")
    for option in _api_options(on_command=True):
        option(cmd)  # a Command: the option is appended to its params
    cmd._api_options = True  # type: ignore[attr-defined]
    run = cmd.callback

    @functools.wraps(run)
    def taking(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in API_OPTIONS}
        found = click.get_current_context().find_object(Context)
        if found is not None:
            found.given_after(**given)
        return run(*args, **kwargs)

    cmd.callback = taking
    return cmd


def api_group(name: str, doc: str) -> click.Group:
    """A command group talking to the service: --url, --output and --user, and a Context
    for its commands."""

    @click.group(name, help=doc, cls=ApiGroup)
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


def load_settings(**values: Any) -> Settings:
    """The service's settings (SLUICEGATE_* and `values`), or a one-line usage error naming
    each bad one, not a traceback."""
    from supervisor.settings import Settings, settings_problems

    try:
        return Settings(**values)
    except ValueError as exc:  # pydantic's ValidationError
        raise CliError(f"bad settings: {settings_problems(exc)}", EXIT_USAGE) from None
