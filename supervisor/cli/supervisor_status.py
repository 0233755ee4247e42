"""`sluicegate supervisor status|health|stats`: how a supervisor is doing, for people (a table,
refreshed in place with --watch) or scripts (-o json)."""

from __future__ import annotations

import time
from typing import Any

import click

from supervisor.cli.client import EXIT_REFUSED, CliError, ServiceError
from supervisor.cli.common import Context, pass_context
from supervisor.cli.output import emit_json, table
from tasks.partitions import order, parse_key

BASE = "/druid/indexer/v1/supervisor"
CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen (click drops it when not on a terminal)
pause = time.sleep


def _partition_order(key: str) -> tuple[str, int]:
    """The service's partition keys ("0", "topic:0") in partition order."""
    return order(parse_key(key))


def _offsets(offsets: dict[str, int] | None) -> str:
    if not offsets:
        return "-"
    return " ".join(f"{p}={offsets[p]}" for p in sorted(offsets, key=_partition_order))


def _compaction_status(supervisor_id: str, p: dict[str, Any]) -> str:
    rows = [
        [kind, p[f"segmentCount{kind}"], p[f"intervalCount{kind}"], p[f"bytes{kind}"]]
        for kind in ("AwaitingCompaction", "Compacted", "Skipped")
    ]
    return "\n".join(
        [
            f"supervisor {supervisor_id}  {p['state']}  compaction {p['scheduleStatus']}",
            f"datasource {p['dataSource']}",
            "",
            table(["", "SEGMENTS", "INTERVALS", "BYTES"], rows),
        ]
    )


def render_status(status: dict[str, Any]) -> str:
    """The status payload as a page: the header, task groups with their tasks, partitions."""
    p = status["payload"]
    if "scheduleStatus" in p:  # a compaction supervisor's AutoCompactionSnapshot
        return _compaction_status(status["id"], p)
    health = "healthy" if p.get("healthy") else "UNHEALTHY"
    state = (
        p["state"] if p["state"] == p["detailedState"] else f"{p['state']} ({p['detailedState']})"
    )
    lines = [
        f"supervisor {status['id']}  {state}  {health}",
        f"datasource {p['dataSource']}  stream {p['stream']}  partitions {p['partitions']}  "
        f"replicas {p['replicas']}  taskDuration {p['durationSeconds']}s",
        f"aggregate lag {p['aggregateLag']}  offsets updated {p.get('offsetsLastUpdated') or '-'}",
        "",
    ]
    tasks = sorted(
        p["activeTasks"] + p["publishingTasks"],
        key=lambda t: (t["taskGroupId"], t["type"], t["id"]),
    )
    if tasks:
        rows = [
            [
                t["taskGroupId"],
                t["id"],
                t["type"],
                f"{t['remainingSeconds']}s",
                _offsets(t.get("currentOffsets")),
                sum((t.get("lag") or {}).values()),
            ]
            for t in tasks
        ]
        lines.append(table(["GROUP", "TASK", "TYPE", "REMAINING", "CURRENT OFFSETS", "LAG"], rows))
    else:
        lines.append("no running tasks")
    latest, committed, lag = p["latestOffsets"], p["committedOffsets"], p["minimumLag"]
    keys = sorted(set(latest) | set(committed), key=_partition_order)
    if keys:
        lines.append("")
        rows = [[k, latest.get(k), committed.get(k), lag.get(k)] for k in keys]
        lines.append(table(["PARTITION", "LATEST", "COMMITTED", "LAG"], rows))
    if p["recentErrors"]:
        lines += ["", "recent errors:"]
        lines += [
            f"  {e['timestamp']}  {e['exceptionClass']}: {e['message']}" for e in p["recentErrors"]
        ]
    if p.get("warnings"):
        lines += ["", "warnings:"] + [f"  {w}" for w in p["warnings"]]
    return "\n".join(lines)


@click.command("status")
@click.argument("supervisor_id")
@click.option("--watch", "-w", is_flag=True, help="Refresh in place until Ctrl-C.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.5),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
@pass_context
def status(ctx: Context, supervisor_id: str, watch: bool, interval: float) -> None:
    """State, health, task groups and their tasks, offsets, lag and recent errors."""
    while True:
        report = ctx.client.get(f"{BASE}/{supervisor_id}/status")
        if ctx.json:
            emit_json(report)
        else:
            click.echo((CLEAR if watch else "") + render_status(report))
        if not watch:
            return
        try:
            pause(interval)
        except KeyboardInterrupt:
            return


@click.command("health")
@click.argument("supervisor_id")
@pass_context
def health(ctx: Context, supervisor_id: str) -> None:
    """Exit 0 when the supervisor is healthy; 1 (saying why) when it is not."""
    try:
        result = ctx.client.get(f"{BASE}/{supervisor_id}/health")
    except ServiceError as exc:
        if exc.status_code != 503:
            raise
        detail = ctx.client.get(f"{BASE}/{supervisor_id}/status")["payload"]
        if ctx.json:
            emit_json({"healthy": False, "detailedState": detail["detailedState"]})
            raise CliError(f"supervisor {supervisor_id} is unhealthy", EXIT_REFUSED) from None
        raise CliError(
            f"supervisor {supervisor_id} is unhealthy: {detail['detailedState']}", EXIT_REFUSED
        ) from None
    ctx.done(result, f"supervisor {supervisor_id} is healthy")


@click.command("stats")
@click.argument("supervisor_id")
@pass_context
def stats(ctx: Context, supervisor_id: str) -> None:
    """Row counts of each running task, by task group, and how many a second it processed over
    the last minute (Druid's 1m moving average)."""
    report = ctx.client.get(f"{BASE}/{supervisor_id}/stats")
    if ctx.json:
        emit_json(report)
        return
    rows = []
    for group, tasks in sorted(report.items(), key=lambda item: int(item[0])):
        for task_id, entry in sorted(tasks.items()):
            totals = entry.get("totals", {}).get("buildSegments", entry.get("totals", {}))
            minute = entry.get("movingAverages", {}).get("buildSegments", {}).get("1m", {})
            rows.append(
                [
                    group,
                    task_id,
                    totals.get("processed"),
                    totals.get("processedWithError"),
                    totals.get("unparseable"),
                    totals.get("thrownAway"),
                    f"{minute.get('processed', 0.0):.1f}",
                ]
            )
    if not rows:
        click.echo("no running tasks")
        return
    headers = ["GROUP", "TASK", "PROCESSED", "WITH ERROR", "UNPARSEABLE", "THROWN AWAY", "PER S 1M"]
    click.echo(table(headers, rows))
