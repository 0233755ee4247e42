"""`sluicegate task ...` and `sluicegate segments ...`: indexing tasks and what they published."""

from __future__ import annotations

import time

import click

from supervisor.cli.common import Context, api_group, confirm, pass_context, yes_option
from supervisor.cli.output import emit_json, key_values, table
from tasks.storage import load_spec_uri

TASKS = "/druid/indexer/v1"
STATES = ("running", "complete", "waiting", "pending")
SHUTDOWN_WAIT_S = 30.0  # a shutdown is the leader's next pass: usually well under a second


task_group = api_group(
    "task", "List and inspect indexing tasks, read their reports and logs, shut them down."
)


@task_group.command("list")
@click.option("--state", type=click.Choice(STATES), help="Only tasks in this state.")
@click.option("--datasource", help="Only tasks of this datasource.")
@click.option("--max", "limit", type=click.IntRange(min=0), help="At most this many, newest first.")
@click.option("--type", "task_type", help="Only tasks of this type (index_kafka).")
@click.option(
    "--created",
    metavar="START_END",
    help="Only tasks created in this interval: two ISO-8601 times joined by '_'.",
)
@pass_context
def list_tasks(
    ctx: Context,
    state: str | None,
    datasource: str | None,
    limit: int | None,
    task_type: str | None,
    created: str | None,
) -> None:
    """List tasks, newest first."""
    params = {
        "state": state,
        "datasource": datasource,
        "max": limit,
        "type": task_type,
        "createdTimeInterval": created,
    }
    found = ctx.client.get(f"{TASKS}/tasks", **{k: v for k, v in params.items() if v is not None})
    if ctx.json:
        emit_json(found)
        return
    if not found:
        click.echo("no tasks")
        return
    rows = [
        [
            t["id"],
            t["dataSource"],
            t["statusCode"],
            t["createdTime"],
            "-" if t["duration"] < 0 else f"{t['duration'] / 1000:.1f}s",
            t.get("errorMsg"),
        ]
        for t in found
    ]
    click.echo(table(["ID", "DATASOURCE", "STATUS", "CREATED", "DURATION", "ERROR"], rows))


@task_group.command("status")
@click.argument("task_id")
@pass_context
def status(ctx: Context, task_id: str) -> None:
    """A task's status, location and error."""
    result = ctx.client.get(f"{TASKS}/task/{task_id}/status")
    if ctx.json:
        emit_json(result)
        return
    s = result["status"]
    location = s["location"]
    where = f"{location['host']}:{location['port']}" if location.get("host") else None
    click.echo(
        key_values(
            [
                ("id", s["id"]),
                ("datasource", s["dataSource"]),
                ("status", s["statusCode"]),
                ("created", s["createdTime"]),
                ("duration", None if s["duration"] < 0 else f"{s['duration'] / 1000:.1f}s"),
                ("location", where),
                ("error", s.get("errorMsg")),
            ]
        )
    )


@task_group.command("reports")
@click.argument("task_id")
@pass_context
def reports(ctx: Context, task_id: str) -> None:
    """A task's row counts, published segments and sampled unparseable records."""
    result = ctx.client.get(f"{TASKS}/task/{task_id}/reports")
    if ctx.json:
        emit_json(result)
        return
    payload = result["ingestionStatsAndErrors"]["payload"]
    stats = payload["rowStats"]  # a running task's live report: its totals beside the averages
    totals = stats.get("totals", stats)["buildSegments"]
    pairs = [("state", payload["ingestionState"])]
    pairs += [(name, totals.get(name)) for name in sorted(totals)]
    pairs += [("segments", len(payload.get("segments") or [])), ("error", payload.get("errorMsg"))]
    click.echo(key_values(pairs))
    for event in payload["unparseableEvents"]["buildSegments"]:
        click.echo(f"unparseable at {event.get('partition')}/{event.get('offset')}: {event}")


@task_group.command("log")
@click.argument("task_id")
@pass_context
def log(ctx: Context, task_id: str) -> None:
    """A task's log (its Spark driver's output)."""
    click.echo(ctx.client.text(f"{TASKS}/task/{task_id}/log"), nl=False)


@task_group.command("shutdown")
@click.argument("task_id")
@yes_option
@pass_context
def shutdown(ctx: Context, task_id: str, yes: bool) -> None:
    """Kill a task (its supervisor replaces it from the same offsets). The overlord's next pass
    does it; this waits a little for that and says whether it is done."""
    confirm(f"Kill task {task_id}?", yes)
    result = ctx.client.post(f"{TASKS}/task/{task_id}/shutdown")
    deadline = time.monotonic() + SHUTDOWN_WAIT_S
    while True:
        state = ctx.client.get(f"{TASKS}/task/{task_id}/status")["status"]["status"]
        if state != "RUNNING" or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    message = "shut down" if state != "RUNNING" else "shutdown requested (still running)"
    ctx.done(result, f"task {task_id} {message}")


@task_group.command("shutdown-all")
@click.argument("datasource")
@yes_option
@pass_context
def shutdown_all(ctx: Context, datasource: str, yes: bool) -> None:
    """Kill every running task of a datasource (Druid's shutdownAllTasks; its supervisor
    replaces them: suspend it to stop ingesting). Waits a little, as shutdown does."""
    confirm(f"Kill every running task of datasource {datasource}?", yes)
    params = {"state": "running", "datasource": datasource}
    asked = {t["id"] for t in ctx.client.get(f"{TASKS}/tasks", **params)}
    result = ctx.client.post(f"{TASKS}/datasources/{datasource}/shutdownAllTasks")
    deadline = time.monotonic() + SHUTDOWN_WAIT_S
    while True:
        left = asked & {t["id"] for t in ctx.client.get(f"{TASKS}/tasks", **params)}
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    message = f"{len(asked)} running task(s) of datasource {datasource} shut down"
    if left:
        message += f" ({len(left)} still running)"
    ctx.done(result, message)


segments_group = api_group(
    "segments", "Published segments of a datasource: list, mark unused or used again, kill."
)


@segments_group.command("list")
@click.argument("datasource")
@pass_context
def list_segments(ctx: Context, datasource: str) -> None:
    """The used segments of DATASOURCE: interval, rows, size and Parquet file."""
    found = ctx.client.get(
        f"/druid/coordinator/v1/metadata/datasources/{datasource}/segments", full=""
    )
    if ctx.json:
        emit_json(found)
        return
    rows = [
        [s["identifier"], s["interval"], s["numRows"], s["size"], load_spec_uri(s["loadSpec"])]
        for s in found
    ]
    click.echo(table(["SEGMENT", "INTERVAL", "ROWS", "BYTES", "PATH"], rows))


workers_group = api_group(
    "workers", "Task hosts (`sluicegate worker`): list them, stop or resume giving them tasks."
)


@workers_group.command("list")
@pass_context
def list_workers(ctx: Context) -> None:
    """Task hosts heard from lately: capacity, tasks running, the newest task's end."""
    found = ctx.client.get(f"{TASKS}/workers")
    if ctx.json:
        emit_json(found)
        return
    if not found:
        click.echo("no task hosts: tasks run on the overlord's own host")
        return
    rows = [
        [
            w["worker"]["host"],
            "yes" if w["worker"]["version"] else "no",
            f"{w['currCapacityUsed']}/{w['worker']['capacity']}",
            ", ".join(w["runningTasks"]) or "-",
            w.get("lastCompletedTaskTime") or "-",
        ]
        for w in found
    ]
    click.echo(table(["HOST", "ENABLED", "USED", "RUNNING TASKS", "LAST COMPLETED"], rows))


@workers_group.command("disable")
@click.argument("host")
@pass_context
def disable_worker(ctx: Context, host: str) -> None:
    """Give HOST (host:port) no new tasks; its running tasks go on."""
    ctx.done(ctx.client.post(f"{TASKS}/worker/{host}/disable"), f"task host {host} disabled")


@workers_group.command("enable")
@click.argument("host")
@pass_context
def enable_worker(ctx: Context, host: str) -> None:
    """Let HOST (host:port) take new tasks again."""
    ctx.done(ctx.client.post(f"{TASKS}/worker/{host}/enable"), f"task host {host} enabled")
