"""Density: how many quiet tasks one task host holds.

N supervisors, each of its own one-partition topic at `--rate` records a second (20), on one
host; `--levels` raises N step by step. At each level, once every supervisor has published
since it was added, a window of `--window` seconds is measured: a record's freshness is its
segment's publish time minus its produce time (as bench/freshness.py), the publish latency is
the overlord's sluicegate_publish_seconds over the window (each publish a snapshot of its
datasource's Iceberg table), and the memory is the resident set of every process of the
host's tasks (the sessions they lead: one task process each, or the one shared application
with its JVM and Python workers). The level passes while
freshness p99 is at most `--p99-limit` (15 s) and the memory at most `--memory-limit-gb`
(16); the first level that does not pass ends the ramp.

Both runtimes run in the same process, one after the other: `process` (a Spark driver process per
task) and `shared` (one application per host, tasks/runtime/shared.py, which bench/live.py starts
with the service; the first level waits until its Spark runs, as a host's long-lived application
would). After its last level each runtime's supervisors are terminated, and each task's report gives
its first batch (from its first read to its first persist), its start (from its row's creation to
its first persist) and its mean batch (persist seconds over persists): a first batch that costs what
the later ones do is close to the mean.

    .venv/bin/python bench/density.py
    .venv/bin/python bench/density.py --runtimes shared --levels 10,50,100,150 --window 30
    .venv/bin/python bench/density.py --runtimes shared --postgres   # the metadata DB there

Writes bench/results/density.json and ends with
`RATIO tasks_per_host=<shared's N> rss_mb_per_task=<...> first_batch_s=<p99 over its tasks>
vs_process_per_task=<shared's N / process's N>`.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from live import BASE, Stack, epoch, running, write_results
from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic
from supervisor.testkit.waits import percentile
from tasks.procfs import SESSION, pids, stat_fields

PUBLISHED_BOUND_S = 600.0  # a level whose supervisors have not all published by then fails


class Producers:
    """One producer thread for every topic: `rate` records a second to each."""

    def __init__(self, bootstrap: str, rate: float) -> None:
        import threading

        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        self.rate = rate
        self.topics: list[str] = []
        self.sent: list[tuple[float, int]] = []  # (produce time, records) of each round
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="producers", daemon=True)
        self.thread.start()

    def add(self, topic: str) -> None:
        with self.lock:
            self.topics.append(topic)

    def _run(self) -> None:
        period = 1.0 / self.rate
        n, began = 0, time.time()
        # paced by the clock: a round's own time (a hundred topics) does not slow the rate
        while not self.stopping.wait(max(0.0, began + (n + 1) * period - time.time())):
            now = time.time()
            with self.lock:
                topics = list(self.topics)
            record = json.dumps({"ts": int(now * 1000), "word": f"w{n % 50}"}).encode()
            for topic in topics:
                self.producer.produce(topic, record)
            self.producer.poll(0)
            with self.lock:
                self.sent.append((now, len(topics)))
            n += 1

    def produced(self, since: float, until: float) -> int:
        """Records produced with a time in [since, until]."""
        with self.lock:
            return sum(count for at, count in self.sent if since <= at <= until)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.producer.flush(30)


def spec(ds: str, topic: str, bootstrap: str, handoff_period: str) -> dict[str, Any]:
    body = supervisor_spec(
        ds,
        topic,
        bootstrap,
        ["word"],
        tuning={"intermediateHandoffPeriod": handoff_period},
        period="PT30S",
        taskDuration="PT1H",
        useEarliestOffset=False,
    )
    body["spec"]["dataSchema"]["timestampSpec"] = {"column": "ts", "format": "millis"}
    return body


def sessions(stack: Stack, runtime: str) -> set[int]:
    """The session ids of the host's tasks (each task process, or the application, leads one)."""
    work = stack.settings.work_dir
    if runtime == "shared":
        try:
            return {int(json.loads((work / "host-app" / "app.json").read_text())["pid"])}
        except (OSError, ValueError, KeyError):
            return set()
    found = set()
    for pid_file in (work / "tasks").glob("*/pid"):
        try:
            found.add(int(pid_file.read_text()))
        except (OSError, ValueError):
            continue
    return found


def rss_mb(leaders: set[int]) -> float:
    """The resident memory of every process in those sessions."""
    total = 0
    for pid in pids():
        try:
            if int(stat_fields(pid)[SESSION]) not in leaders:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


def published_since(stack: Stack, names: list[str], since: datetime) -> bool:
    rows = stack.rows(
        select(SegmentRow.datasource)
        .where(SegmentRow.datasource.in_(names), SegmentRow.created_at >= since)
        .distinct()
    )
    return len(rows) == len(names)


def freshness(stack: Stack, produced_from: float, produced_to: float) -> list[float]:
    values: list[float] = []
    since = datetime.fromtimestamp(produced_from, UTC)  # a record is published after it is made
    query = select(SegmentRow).where(SegmentRow.used.is_(True), SegmentRow.created_at >= since)
    for segment in stack.rows(query):
        published = epoch(segment.created_at)
        times = pq.read_table(segment.path, columns=["__time"]).column("__time")
        millis = times.cast(pa.timestamp("ms", tz=times.type.tz)).cast(pa.int64())
        for stamp in millis.to_pylist():
            if produced_from <= stamp / 1000 <= produced_to:
                values.append(published - stamp / 1000)
    return values


def wait_for_host_app(stack: Stack, timeout_s: float = 180.0) -> float:
    """Seconds until the service's task host application (bench/live.py starts it with the
    service) has its Spark up: a host's application is long-lived, so the levels measure tasks
    on a running one, not its start."""
    from tasks.host_protocol import API
    from tasks.protocol import TOKEN_HEADER

    home = stack.settings.work_dir / "host-app"
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        try:
            app = json.loads((home / "app.json").read_text())
            token = (home / "token").read_text().strip()
            answer = httpx.get(
                f"{app['scheme']}://127.0.0.1:{app['port']}{API}/tasks",
                headers={TOKEN_HEADER: token},
                timeout=5,
            ).json()
            if answer.get("spark") == "READY":
                return time.monotonic() - began
            if answer.get("spark") not in (None, "STARTING"):
                raise SystemExit(f"the task host application failed: {answer['spark']}")
        except (OSError, ValueError, KeyError, httpx.HTTPError):
            pass
        time.sleep(0.5)
    raise SystemExit(f"the task host application was not ready in {timeout_s:.0f} s")


def ramp(runtime: str, args: argparse.Namespace, metadata_url: str | None) -> dict[str, Any]:
    levels: list[dict[str, Any]] = []
    reached, names = 0, list[str]()
    with running(
        f"sluicegate-density-{runtime}-",
        args.keep,
        task_master=args.master,
        task_runtime=runtime,
        supervisor_workers=args.supervisor_workers,
        metadata_url=metadata_url,
    ) as stack:
        if runtime == "shared":
            print(f"shared: the application ran in {wait_for_host_app(stack):.1f} s", flush=True)
        producers = Producers(stack.bootstrap, args.rate)
        try:
            with httpx.Client(base_url=stack.url, timeout=60) as api:
                for level in args.levels:
                    # the level's topics first, as a user's topics are there before their
                    # supervisors: the broker's creation of a hundred topics took half the CPU
                    # while the first tasks read their first batches
                    added = [f"d{n:04d}" for n in range(len(names), level)]
                    for name in added:
                        create_topic(stack.bootstrap, name, 1)
                        producers.add(name)
                    since = datetime.now(UTC)
                    for name in added:
                        body = spec(name, name, stack.bootstrap, args.handoff_period)
                        api.post(BASE, json=body).raise_for_status()
                        names.append(name)
                    began = time.monotonic()
                    while not published_since(stack, names, since):
                        if time.monotonic() - began > PUBLISHED_BOUND_S:
                            break
                        time.sleep(2)
                    else:
                        result = measure(stack, producers, level, args)
                        result["warm_up_s"] = round(time.monotonic() - began, 1)
                        levels.append(result)
                        print(json.dumps(result), flush=True)
                        if result["passed"]:
                            reached = level
                            continue
                        break
                    levels.append({"tasks": level, "passed": False, "published": False})
                    print(f"{runtime}: {level} supervisors did not all publish", flush=True)
                    break
                starts = finish(api, stack, names)
        finally:
            producers.stop()
    return {"runtime": runtime, "tasks_per_host": reached, "levels": levels, **starts}


def measure(
    stack: Stack, producers: Producers, level: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Memory through the window, then the freshness of the records made in it: waited for
    until all are published or the level has failed anyway (`--p99-limit` past the window's
    end); a record still unpublished counts as never published, not as left out."""
    runtime = stack.settings.task_runtime
    measured_from = time.time()
    published_before = publish_buckets(stack)
    memory = []
    deadline = time.monotonic() + args.window
    while time.monotonic() < deadline:
        memory.append(rss_mb(sessions(stack, runtime)))
        time.sleep(2)
    measured_to = time.time()
    publishes = publish_latency(published_before, publish_buckets(stack))
    expected = producers.produced(measured_from, measured_to)
    values = freshness(stack, measured_from, measured_to)
    while len(values) < expected and time.time() < measured_to + args.p99_limit + 5:
        time.sleep(2)
        values = freshness(stack, measured_from, measured_to)
    missing = max(0, expected - len(values))
    peak = max(memory) if memory else 0.0
    p99 = percentile([*values, *[math.inf] * missing], 99)
    p99 = math.inf if math.isnan(p99) and values else p99  # (between two unpublished)
    return {
        "tasks": level,
        "records": len(values),
        "expected": expected,
        "unpublished": missing,
        "p50_s": round(percentile(values, 50), 2),
        "p99_s": round(p99, 2),
        "rss_mb": round(peak),
        "rss_mb_per_task": round(peak / level, 1),
        **publishes,
        "passed": bool(values) and p99 <= args.p99_limit and peak <= args.memory_limit_gb * 1024,
    }


def publish_buckets(stack: Stack) -> dict[float, float]:
    """The overlord's sluicegate_publish_seconds histogram of published outcomes, summed over
    the datasources: cumulative count by upper bound."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{stack.url}/metrics", timeout=30).text
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "sluicegate_publish_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket") and sample.labels.get("outcome") == "published":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return buckets


def publish_latency(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """The window's publishes: how many, p50 and p99 interpolated within the histogram's
    buckets (as Prometheus' histogram_quantile does), and the share done within 1 s."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0

    def quantile(q: float) -> float:
        rank, lower, below = q * total, 0.0, 0.0
        for bound, count in zip(bounds, counts, strict=True):
            if count >= rank:
                if math.isinf(bound):
                    return lower
                share = (rank - below) / (count - below) if count > below else 0.0
                return lower + (bound - lower) * share
            lower, below = bound, count
        return math.nan

    within = next((c for b, c in zip(bounds, counts, strict=True) if b == 1.0), 0.0)
    return {
        "publishes": int(total),
        "publish_p50_s": round(quantile(0.5), 3) if total else None,
        "publish_p99_s": round(quantile(0.99), 3) if total else None,
        "publish_within_1s": round(within / total, 4) if total else None,
    }


def finish(api: httpx.Client, stack: Stack, names: list[str]) -> dict[str, Any]:
    """Terminate every supervisor; the tasks' first batches and starts from their reports."""
    for name in names:
        api.post(f"{BASE}/{name}/terminate")
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        rows = stack.rows(select(TaskRow))
        if all(r.status != "RUNNING" for r in rows):
            break
        time.sleep(2)
    start, batch = [], []
    reads: list[tuple[float, float]] = []  # (first read, first batch) of each task
    for row in stack.rows(select(TaskRow)):
        report = row.report or {}
        read, persisted = report.get("firstReadAt"), report.get("firstPersistAt")
        if read and persisted:
            persisted_s = datetime.fromisoformat(persisted).timestamp()
            read_s = datetime.fromisoformat(read).timestamp()
            reads.append((read_s, persisted_s - read_s))
            start.append(persisted_s - epoch(row.created_at))
        counters = report.get("counters") or {}
        if counters.get("persists"):
            batch.append(counters["persistSeconds"] / counters["persists"])
    reads.sort()
    first_batch = [seconds for _, seconds in reads]
    return {
        "first_batch_p50_s": round(percentile(first_batch, 50), 2),
        "first_batch_p99_s": round(percentile(first_batch, 99), 2),
        # what a task's batches took on average, its first included: the first batch's yardstick
        "batch_mean_p50_s": round(percentile(batch, 50), 2),
        "batch_mean_p99_s": round(percentile(batch, 99), 2),
        "start_to_first_persist_p50_s": round(percentile(start, 50), 2),
        "start_to_first_persist_p99_s": round(percentile(start, 99), 2),
        "tasks_reported": len(first_batch),
        # each task's first batch by when it began, from the first task's first read: whether
        # the slow ones are those that started together
        "first_batches": [
            [round(read - reads[0][0], 2), round(seconds, 2)] for read, seconds in reads
        ],
    }


def _seconds(period: str) -> float:
    from tasks.spec.periods import duration_millis

    return duration_millis(period) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=20.0, help="records/s per supervisor")
    parser.add_argument(
        "--levels",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[4, 8, 12, 16, 25, 50, 75, 100, 125, 150, 200],
    )
    parser.add_argument(
        "--process-levels",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24],
        help="the process runtime's levels (a JVM each: smaller steps)",
    )
    parser.add_argument("--window", type=float, default=40.0, help="seconds measured per level")
    parser.add_argument("--handoff-period", default="PT5S", help="intermediateHandoffPeriod")
    parser.add_argument("--p99-limit", type=float, default=15.0)
    parser.add_argument("--memory-limit-gb", type=float, default=16.0)
    parser.add_argument("--runtimes", default="process,shared")
    parser.add_argument(
        "--supervisor-workers",
        type=int,
        default=4,
        help="the service's supervisor_workers: passes run at once",
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", help="run in a directory under this one and keep it")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="the metadata DB on PostgreSQL (Debian's, started here), not a SQLite file",
    )
    args = parser.parse_args()
    postgres = None
    if args.postgres:
        from supervisor.devstack.postgres import LocalPostgres

        postgres = LocalPostgres().start()
    try:
        ramps(args, postgres)
    finally:
        if postgres is not None:
            postgres.stop()


def ramps(args: argparse.Namespace, postgres: Any) -> None:
    results: dict[str, Any] = {
        "rate": args.rate,
        "window_s": args.window,
        "metadata_db": "postgresql" if postgres is not None else "sqlite",
    }
    shared_levels = args.levels
    for runtime in args.runtimes.split(","):
        args.levels = args.process_levels if runtime == "process" else shared_levels
        url = postgres.create_database(f"density_{runtime}") if postgres is not None else None
        results[runtime] = ramp(runtime, args, url)
        shown = {k: v for k, v in results[runtime].items() if k != "first_batches"}
        print(json.dumps(shown), flush=True)
    print(f"results: {write_results('density', results)}")
    shared, process = results.get("shared"), results.get("process")
    if shared is None:
        return
    passed = [lv for lv in shared["levels"] if lv.get("passed")]
    per_task = passed[-1]["rss_mb_per_task"] if passed else float("nan")
    versus = (
        shared["tasks_per_host"] / max(1, process["tasks_per_host"])
        if process is not None
        else float("nan")
    )
    print(
        f"RATIO tasks_per_host={shared['tasks_per_host']} rss_mb_per_task={per_task} "
        f"first_batch_s={shared['first_batch_p99_s']} vs_process_per_task={versus:.1f}"
    )


if __name__ == "__main__":
    main()
