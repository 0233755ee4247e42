"""`sluicegate completion SHELL`: the shell completion script, to source from a shell's rc file."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class


@click.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL, for example:
    `eval "$(sluicegate completion bash)"` in ~/.bashrc."""
    root = ctx.find_root().command
    klass = get_completion_class(shell)
    assert klass is not None  # every choice has a class
    click.echo(klass(root, {}, "sluicegate", "_SLUICEGATE_COMPLETE").source())
