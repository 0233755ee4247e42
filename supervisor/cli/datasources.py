"""`sluicegate rules ...`, `sluicegate compaction ...` and the changes of `sluicegate segments
...`: a datasource's retention rules, its compaction, and its segments marked unused, used
again or killed, over Druid's coordinator API (supervisor/api/retention.py, compaction.py)."""

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
from supervisor.cli.tasks import segments_group

COORDINATOR = "/druid/coordinator/v1"


def _rule_scope(rule: dict[str, Any]) -> str:
    """What a rule applies to: its period, its interval, or every segment (forever)."""
    if "period" in rule:
        future = rule.get("includeFuture")
        return str(rule["period"]) + ("" if future is None or future else " (not the future)")
    return str(rule.get("interval") or "forever")


rules_group = api_group(
    "rules", "A datasource's retention rules: which intervals are kept and which dropped."
)


@rules_group.command("show")
@click.argument("datasource")
@click.option("--full", is_flag=True, help="The default rules (_default) follow its own.")
@pass_context
def show_rules(ctx: Context, datasource: str, full: bool) -> None:
    """DATASOURCE's rules in order (the first that applies to a segment wins); `_default` names
    the cluster's default rules, which apply after a datasource's own."""
    params = {"full": ""} if full else {}
    found = ctx.client.get(f"{COORDINATOR}/rules/{datasource}", **params)
    if ctx.json:
        emit_json(found)
        return
    if not found:
        click.echo(f"no rules of its own for {datasource}: the default rules apply")
        return
    rows = [[n, rule.get("type"), _rule_scope(rule)] for n, rule in enumerate(found, 1)]
    click.echo(table(["#", "RULE", "APPLIES TO"], rows))


@rules_group.command("set")
@click.argument("datasource")
@click.argument("file", type=click.Path(dir_okay=False))
@pass_context
def set_rules(ctx: Context, datasource: str, file: str) -> None:
    """Replace DATASOURCE's rules with FILE's JSON list of Druid rules (loadByPeriod,
    dropBeforeByPeriod, ...; an empty list leaves only the default rules)."""
    rules = read_json_file(file)
    result = ctx.client.post(f"{COORDINATOR}/rules/{datasource}", rules)
    count = len(rules) if isinstance(rules, list) else 0
    ctx.done(result, f"datasource {datasource}: {count} rule(s) set")


compaction_group = api_group(
    "compaction", "Auto-compaction: each datasource's config and status, the cluster's slots."
)


@compaction_group.command("status")
@click.argument("datasource", required=False)
@pass_context
def compaction_status(ctx: Context, datasource: str | None) -> None:
    """Each configured datasource's compaction (or DATASOURCE's): whether it runs, and the
    bytes and segments compacted and still awaiting it."""
    params = {"dataSource": datasource} if datasource else {}
    found = ctx.client.get(f"{COORDINATOR}/compaction/status", **params)["latestStatus"]
    if ctx.json:
        emit_json(found)
        return
    if not found:
        click.echo("no datasource has a compaction config")
        return
    rows = [
        [
            s["dataSource"],
            s.get("scheduleStatus"),
            s.get("bytesAwaitingCompaction"),
            s.get("bytesCompacted"),
            s.get("segmentCountAwaitingCompaction"),
            s.get("segmentCountCompacted"),
        ]
        for s in found
    ]
    headers = ["DATASOURCE", "STATUS", "BYTES AWAITING", "BYTES COMPACTED"]
    click.echo(table([*headers, "SEGMENTS AWAITING", "SEGMENTS COMPACTED"], rows))


@compaction_group.command("show")
@click.argument("datasource")
@pass_context
def show_compaction(ctx: Context, datasource: str) -> None:
    """DATASOURCE's compaction config, as Druid's DataSourceCompactionConfig."""
    found = ctx.client.get(f"{COORDINATOR}/config/compaction/{datasource}")
    if ctx.json:
        emit_json(found)
        return
    click.echo(key_values(list(found.items())))


@compaction_group.command("set")
@click.argument("file", type=click.Path(dir_okay=False))
@pass_context
def set_compaction(ctx: Context, file: str) -> None:
    """Compact the datasource FILE's config names (Druid's DataSourceCompactionConfig: its
    dataSource, skipOffsetFromLatest, tuningConfig, granularitySpec, ...)."""
    config = read_json_file(file)
    result = ctx.client.post(f"{COORDINATOR}/config/compaction", config)
    name = config.get("dataSource") if isinstance(config, dict) else None
    ctx.done(result, f"datasource {name}: compaction config set")


@compaction_group.command("delete")
@click.argument("datasource")
@pass_context
def delete_compaction(ctx: Context, datasource: str) -> None:
    """Stop compacting DATASOURCE: its config goes (what was compacted stays)."""
    result = ctx.client.request("DELETE", f"{COORDINATOR}/config/compaction/{datasource}")
    ctx.done(result, f"datasource {datasource}: compaction config deleted")


@compaction_group.command("cluster")
@click.option(
    "--ratio",
    type=click.FloatRange(min=0, max=1),
    help="compactionTaskSlotRatio: the share of the task hosts' slots compact tasks may take.",
)
@click.option(
    "--max",
    "most",
    type=click.IntRange(min=0),
    help="maxCompactionTaskSlots: compact tasks running at once, at most.",
)
@click.option(
    "--priority",
    metavar="DATASOURCE",
    help="compactionPolicy.priorityDatasource: compacted before any other ('' for none).",
)
@pass_context
def compaction_cluster(
    ctx: Context, ratio: float | None, most: int | None, priority: str | None
) -> None:
    """The cluster's compaction config: with no option, show it; each option given changes
    its field, the others stay."""
    changes: dict[str, Any] = {}
    if ratio is not None:
        changes["compactionTaskSlotRatio"] = ratio
    if most is not None:
        changes["maxCompactionTaskSlots"] = most
    if priority is not None:
        changes["compactionPolicy"] = {"priorityDatasource": priority or None}
    if changes:
        result = ctx.client.post(f"{COORDINATOR}/config/compaction/cluster", changes)
        ctx.done(result, "cluster compaction config set")
        return
    found = ctx.client.get(f"{COORDINATOR}/config/compaction")
    shown = {key: value for key, value in found.items() if key != "compactionConfigs"}
    if ctx.json:
        emit_json(shown)
        return
    click.echo(key_values(list(shown.items())))


# ---- segments: marking and kill ----------------------------------------------------------


def _mark(ctx: Context, datasource: str, body: dict[str, Any], used: bool) -> None:
    action = "markUsed" if used else "markUnused"
    result = ctx.client.post(f"{COORDINATOR}/datasources/{datasource}/{action}", body)
    changed = result["numChangedSegments"]
    ctx.done(result, f"{changed} segment(s) of {datasource} marked {'used' if used else 'unused'}")


def _selected(interval: str | None, segment_ids: tuple[str, ...]) -> dict[str, Any]:
    if bool(interval) == bool(segment_ids):
        raise click.UsageError("give --interval or segment ids, not both nor neither")
    return {"interval": interval} if interval else {"segmentIds": list(segment_ids)}


interval_option = click.option(
    "--interval", metavar="START/END", help="The segments lying within this ISO interval."
)


@segments_group.command("mark-unused")
@click.argument("datasource")
@click.argument("segment_ids", nargs=-1)
@interval_option
@pass_context
def mark_unused(
    ctx: Context, datasource: str, segment_ids: tuple[str, ...], interval: str | None
) -> None:
    """Take DATASOURCE's segments (within --interval, or those named) from every reader; their
    files stay until killed, and mark-used brings them back."""
    _mark(ctx, datasource, _selected(interval, segment_ids), used=False)


@segments_group.command("mark-used")
@click.argument("datasource")
@click.argument("segment_ids", nargs=-1)
@interval_option
@pass_context
def mark_used(
    ctx: Context, datasource: str, segment_ids: tuple[str, ...], interval: str | None
) -> None:
    """Give DATASOURCE's unused segments (within --interval, or those named) back to every
    reader, unless killed meanwhile."""
    _mark(ctx, datasource, _selected(interval, segment_ids), used=True)


@segments_group.command("drop")
@click.argument("datasource")
@yes_option
@pass_context
def drop(ctx: Context, datasource: str, yes: bool) -> None:
    """Mark every segment of DATASOURCE unused (Druid's DELETE of a datasource): no reader sees
    it; its files stay until killed."""
    confirm(f"Mark every segment of {datasource} unused? No reader will see them.", yes)
    result = ctx.client.request("DELETE", f"{COORDINATOR}/datasources/{datasource}")
    ctx.done(result, f"{result['numChangedSegments']} segment(s) of {datasource} marked unused")


@segments_group.command("kill")
@click.argument("datasource")
@click.argument("interval", metavar="START/END")
@yes_option
@pass_context
def kill(ctx: Context, datasource: str, interval: str, yes: bool) -> None:
    """Delete DATASOURCE's unused segments lying within INTERVAL for good: their rows and their
    files (a kill task; `sluicegate task status` follows it)."""
    confirm(f"Delete the unused segments of {datasource} in {interval} for good?", yes)
    path = f"{COORDINATOR}/datasources/{datasource}/intervals/{interval.replace('/', '_')}"
    result = ctx.client.request("DELETE", path)
    ctx.done(result, f"kill task {result['task']} started")
