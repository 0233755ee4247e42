"""`sluicegate supervisor` commands that move running supervisors: early handoff, resets, and
suspend/resume/terminate of every supervisor at once."""

from __future__ import annotations

import click

from supervisor.cli.client import EXIT_USAGE, CliError
from supervisor.cli.common import Context, confirm, pass_context, yes_option

BASE = "/druid/indexer/v1/supervisor"


def _every(name: str, action: str, question: str, word: str, doc: str) -> click.Command:
    """A command changing every supervisor at once, after asking."""

    @click.command(name, help=doc)
    @yes_option
    @pass_context
    def command(ctx: Context, yes: bool) -> None:
        confirm(question, yes)
        ctx.done(ctx.client.post(f"{BASE}/{action}"), f"every supervisor {word}")

    return command


suspend_all = _every(
    "suspend-all",
    "suspendAll",
    "Suspend every supervisor?",
    "suspended",
    "Suspend every supervisor: their tasks publish and none start.",
)
resume_all = _every(
    "resume-all",
    "resumeAll",
    "Resume every suspended supervisor?",
    "resumed",
    "Resume every suspended supervisor.",
)
terminate_all = _every(
    "terminate-all",
    "terminateAll",
    "Terminate every supervisor? Their tasks publish and stop.",
    "terminated",
    "Terminate every supervisor: their tasks publish and stop.",
)


@click.command("handoff")
@click.argument("supervisor_id")
@click.argument("groups", nargs=-1, required=True, type=click.IntRange(min=0))
@pass_context
def handoff(ctx: Context, supervisor_id: str, groups: tuple[int, ...]) -> None:
    """Roll the task GROUPS of a supervisor over now: they publish, successors take over."""
    result = ctx.client.post(
        f"{BASE}/{supervisor_id}/taskGroups/handoff", {"taskGroupIds": list(groups)}
    )
    names = ", ".join(str(g) for g in groups)
    ctx.done(result, f"supervisor {supervisor_id}: handoff of task group(s) {names} requested")


@click.command("reset")
@click.argument("supervisor_id")
@yes_option
@pass_context
def reset(ctx: Context, supervisor_id: str, yes: bool) -> None:
    """Forget a supervisor's committed offsets and kill its tasks; reading restarts from the
    earliest or latest offsets (useEarliestOffset). Records in between are skipped or re-read."""
    confirm(
        f"Reset supervisor {supervisor_id}? Its committed offsets are forgotten and its "
        "tasks killed.",
        yes,
    )
    result = ctx.client.post(f"{BASE}/{supervisor_id}/reset")
    ctx.done(result, f"supervisor {supervisor_id} reset")


def _partition_offsets(values: tuple[str, ...]) -> dict[str, int]:
    offsets: dict[str, int] = {}
    for value in values:
        partition, sep, offset = value.rpartition("=")
        if not sep or not partition or not offset.isdigit():
            raise CliError(
                f"--partition {value}: expected PARTITION=OFFSET, for example 0=1200 "
                "(or topic:0=1200 for a topicPattern)",
                EXIT_USAGE,
            )
        offsets[partition] = int(offset)
    return offsets


@click.command("reset-offsets")
@click.argument("supervisor_id")
@click.option(
    "--partition",
    "-p",
    "partitions",
    multiple=True,
    required=True,
    metavar="PARTITION=OFFSET",
    help="Where a partition resumes (repeatable); topic:partition=offset for a topicPattern.",
)
@yes_option
@pass_context
def reset_offsets(ctx: Context, supervisor_id: str, partitions: tuple[str, ...], yes: bool) -> None:
    """Set where chosen partitions resume; their task groups restart there."""
    offsets = _partition_offsets(partitions)
    io = ctx.client.get(f"{BASE}/{supervisor_id}")["spec"]["ioConfig"]
    stream = io.get("topic") or io.get("topicPattern")
    listed = ", ".join(f"{p} to {o}" for p, o in offsets.items())
    confirm(f"Reset supervisor {supervisor_id}: partition {listed}?", yes)
    body = {
        "type": "kafka",
        "partitions": {"type": "end", "stream": stream, "partitionOffsetMap": offsets},
    }
    result = ctx.client.post(f"{BASE}/{supervisor_id}/resetOffsets", body)
    ctx.done(result, f"supervisor {supervisor_id}: partition {listed}")
