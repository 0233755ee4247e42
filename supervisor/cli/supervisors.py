"""`sluicegate supervisor ...`: manage supervisor specs over the service's HTTP API."""

from __future__ import annotations

from typing import Any

import click

from supervisor.cli.common import (
    Context,
    api_group,
    confirm,
    pass_context,
    read_json_file,
    yes_option,
)
from supervisor.cli.output import emit_json, key_values, table

BASE = "/druid/indexer/v1/supervisor"


supervisor_group = api_group("supervisor", "Create, inspect, control and reset supervisors.")


@supervisor_group.command("submit")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--skip-if-unmodified",
    is_flag=True,
    help="Keep the running version when the spec is unchanged.",
)
@pass_context
def submit(ctx: Context, file: str, skip_if_unmodified: bool) -> None:
    """Create or update a supervisor from a Druid Kafka supervisor spec FILE."""
    spec = read_json_file(file)
    params = {"skipRestartIfUnmodified": "true"} if skip_if_unmodified else {}
    result = ctx.client.post(BASE, spec, **params)
    ctx.done(result, f"supervisor {result['id']} submitted")


@supervisor_group.command("list")
@pass_context
def list_supervisors(ctx: Context) -> None:
    """List supervisors with their state."""
    rows = ctx.client.get(BASE, state="true")
    if ctx.json:
        emit_json(rows)
        return
    if not rows:
        click.echo("no supervisors")
        return
    click.echo(
        table(
            ["ID", "DATASOURCE", "STATE", "DETAILED STATE", "HEALTHY", "SUSPENDED"],
            [
                [
                    r["id"],
                    r.get("dataSource"),
                    r["state"],
                    r["detailedState"],
                    r["healthy"],
                    r.get("suspended"),
                ]
                for r in rows
            ],
        )
    )


def _spec_summary(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    ingestion = spec.get("spec", {})
    io = ingestion.get("ioConfig", {})
    schema = ingestion.get("dataSchema", {})
    return [
        ("id", spec.get("id")),
        ("type", spec.get("type")),
        ("datasource", schema.get("dataSource")),
        ("topic", io.get("topic") or io.get("topicPattern")),
        ("bootstrap.servers", io.get("consumerProperties", {}).get("bootstrap.servers")),
        ("taskCount", io.get("taskCount")),
        ("replicas", io.get("replicas")),
        ("taskDuration", io.get("taskDuration")),
        ("useEarliestOffset", io.get("useEarliestOffset")),
        ("segmentGranularity", schema.get("granularitySpec", {}).get("segmentGranularity")),
        ("suspended", spec.get("suspended")),
    ]


@supervisor_group.command("get")
@click.argument("supervisor_id")
@pass_context
def get(ctx: Context, supervisor_id: str) -> None:
    """Show the current spec of a supervisor (the full spec with -o json)."""
    spec = ctx.client.get(f"{BASE}/{supervisor_id}")
    if ctx.json:
        emit_json(spec)
    else:
        click.echo(key_values(_spec_summary(spec)))


@supervisor_group.command("history")
@click.argument("supervisor_id")
@click.option("--count", type=click.IntRange(min=1), help="Only the newest COUNT versions.")
@pass_context
def history(ctx: Context, supervisor_id: str, count: int | None) -> None:
    """Show the spec versions of a supervisor, newest first."""
    params = {"count": count} if count else {}
    versions = ctx.client.get(f"{BASE}/{supervisor_id}/history", **params)
    if ctx.json:
        emit_json(versions)
        return
    rows = []
    for entry in versions:
        spec = entry["spec"]
        terminated = spec.get("type") == "NoopSupervisorSpec"
        event = (
            "terminated" if terminated else ("suspended" if spec.get("suspended") else "running")
        )
        io = spec.get("spec", {}).get("ioConfig", {})
        rows.append(
            [
                entry["version"],
                event,
                io.get("taskCount"),
                io.get("replicas"),
                io.get("taskDuration"),
            ]
        )
    click.echo(table(["VERSION", "STATE", "TASKCOUNT", "REPLICAS", "TASKDURATION"], rows))


def _change(ctx: Context, supervisor_id: str, action: str, word: str) -> None:
    result = ctx.client.post(f"{BASE}/{supervisor_id}/{action}")
    ctx.done(result, f"supervisor {supervisor_id} {word}")


@supervisor_group.command("suspend")
@click.argument("supervisor_id")
@pass_context
def suspend(ctx: Context, supervisor_id: str) -> None:
    """Suspend a supervisor: its tasks hand off and no new ones start."""
    _change(ctx, supervisor_id, "suspend", "suspended")


@supervisor_group.command("resume")
@click.argument("supervisor_id")
@pass_context
def resume(ctx: Context, supervisor_id: str) -> None:
    """Resume a suspended supervisor."""
    _change(ctx, supervisor_id, "resume", "resumed")


@supervisor_group.command("terminate")
@click.argument("supervisor_id")
@yes_option
@pass_context
def terminate(ctx: Context, supervisor_id: str, yes: bool) -> None:
    """Terminate a supervisor: its tasks publish and stop; its history is kept."""
    confirm(f"Terminate supervisor {supervisor_id}? Its tasks publish and stop.", yes)
    _change(ctx, supervisor_id, "terminate", "terminated")
