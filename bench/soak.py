"""Soak: a month compressed into an hour, to show that what a deployment leaves behind stays
flat: memory, the metadata DB, deep storage and the disk.

`--supervisors` (20) supervisors, each of its own one-partition topic at `--rate` records a
second (5), taskDuration PT30S, intermediateHandoffPeriod PT5S, day segments, their event
times advancing a day a minute. Each datasource has compaction on (skipOffsetFromLatest
P1D), a drop rule (`dropBeforeByPeriod` P7D) and the automatic kill a day after a segment is
dropped; the overlord's rules and kill see time pass at the same pace
(supervisor/testkit/simclock.py). One task host (`sluicegate worker`, its tasks in one shared
application) is SIGKILLed with its application every `--host-kill-every-min` (10) minutes and
started again; the overlord is stopped and started once, at `--overlord-restart-min` (by
default half way, and half a kill period from a kill).

Every `--sample-s` (60) seconds it samples the overlord's and the host application's resident
memory, open files and threads, the metadata DB's size and rows per table, deep storage's
files and bytes, and the bytes of the work and temporary directories; every
`--memory-sample-s` (10) the two processes' memory alone. After the first sixth of the run
(ten minutes of an hour) each series' slope is fitted by least squares; memory life by life
(`slopes`, bench/fits.py), since both processes start afresh during the run.

At the end the producer stops, every supervisor catches up, and every table is read with
pyiceberg: no word twice (`dupes`), and no word missing whose day was not yet past the drop
rule (`lost`; a record of the day the rule was dropping at that moment may be either).
`files_per_interval_p99` is over every day of every table but its two newest (the open day,
and the one closed within the last simulated day, which compaction may not have reached yet;
each other has been awaiting compaction for a day, a minute of the run). The agent
and the overlord are then stopped with SIGTERM; the host application, which nothing adopts,
must end by itself within the orphan timeout (180 s here): any process of the run still alive
a minute past that is counted (`left_alive`).

    .venv/bin/python bench/soak.py                       # an hour
    .venv/bin/python bench/soak.py --minutes 8 --supervisors 4 --host-kill-every-min 3

Writes bench/results/soak.json; ends with `RATIO hours=<h> rss_mb_slope_per_h=<..>
overlord_rss_mb_slope_per_h=<..> db_mb_slope_per_h=<..> disk_mb_slope_per_h=<..>
files_per_interval_p99=<..> lost=<n> dupes=<n> left_alive=<n>` (slopes in MB per hour; the
JSON has each as a share of its mean). `rss_mb` is the overlord's and the host application's
within-life slopes together, each also printed; `host_lives_mb_slope_per_h` is the slope of
the host application's lives' means (is each life heavier than the one before?). After them
come the envelopes' slopes (bench/fits.py): the overlord's least memory per ten minutes of
each life, and the DB's and the disk's greatest and least per ten minutes, which tell a saw
that stays within its bounds from one that climbs. Last come the slopes of the second half of
the overlord's lives and of the DB's and the disk's series (`*_late_mb_slope_per_h`), which tell
a process that climbs while it settles and then levels off from one that keeps climbing.

    .venv/bin/python bench/soak.py --refit DIR/soak-XXXX/soak.json   # fit a kept run again
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fits import (
    by_life,
    common_slope_per_h,
    envelopes,
    late_halves,
    life_slopes,
    lives,
    slope_per_h,
)
from live import workspace, write_results

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.service import LocalService
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic
from supervisor.net import free_port
from supervisor.settings import default_jar_cache
from supervisor.testkit.hosts import application_pid, kill_tasks
from supervisor.testkit.waits import percentile, wait_for
from tasks.procfs import process_tree, with_marker

DAY_S = 86_400.0
SPEED = 1440.0  # a day of event time a minute
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
HOST_WARMUP_S = 120.0  # a task host's application takes its tasks back and fills its heap
ENVELOPE_WINDOW_S = 600.0  # a kill period, two retention windows of ended tasks: a saw's teeth
ORPHAN_TIMEOUT_S = 180  # a host application nothing adopts ends this long after the last call


def _mb(path: Path) -> float:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:
                continue
    return total / 1e6


def _proc(pid: int | None) -> dict[str, float]:
    """Resident MB, open files and threads of a process (and of its children: the shared
    application's JVM and Python workers), zeros when it is gone. `pss_mb` is the resident
    memory with each page shared among them (a forked Python worker's) counted once, in
    shares: `rss_mb` counts it once per process, and so jumps as Spark forks and ends workers.
    `anon_mb` is the anonymous part of that (heaps, stacks: where memory is allocated and
    leaks), also by kind of process (`anon_jvm_mb`, `anon_worker_mb`, `anon_python_mb`); the
    rest is files mapped (libraries, whose shares move as other processes that map them start
    and end)."""
    found = {"rss_mb": 0.0, "pss_mb": 0.0, "anon_mb": 0.0, "open_files": 0.0, "threads": 0.0}
    if pid is None:
        return found
    for member in process_tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text().splitlines()
            fds = len(os.listdir(f"/proc/{member}/fd"))
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status if ":" in line)
        found["rss_mb"] += int(fields.get("VmRSS", "0 kB").split()[0]) / 1024
        pss, anon = _pss_kb(member)
        found["pss_mb"] += pss / 1024
        found["anon_mb"] += anon / 1024
        kind = f"anon_{_kind(fields.get('Name', '').strip(), member)}_mb"
        found[kind] = found.get(kind, 0.0) + anon / 1024
        found["threads"] += int(fields.get("Threads", "0").strip())
        found["open_files"] += fds
    return found


def _kind(name: str, pid: int) -> str:
    """What a process of the tree is: `jvm`, a Spark Python `worker`, or `python` (the
    process itself: the overlord, the host application's driver)."""
    if name == "java":
        return "jvm"
    try:
        if b"pyspark.daemon" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return "worker"
    except OSError:
        pass
    return "python"


def _pss_kb(pid: int) -> tuple[int, int]:
    """A process's proportional resident kB, all and anonymous (0s when it is gone)."""
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0, 0
    fields = {line.split(":", 1)[0]: line.split()[1] for line in lines[1:] if ":" in line}
    return int(fields.get("Pss", 0)), int(fields.get("Pss_Anon", 0))


def memory(run: Run) -> dict[str, Any]:
    """The overlord's and the host application's memory alone (cheap: /proc only), with each
    one's pid (None when there is none: that sample is not fitted)."""
    overlord = run.overlord.process.pid if run.overlord and run.overlord.process else None
    app = application_pid(run.root / "host")
    found: dict[str, Any] = {"at_s": run.at_s()}
    for who, pid in (("overlord", overlord), ("host_app", app)):
        m = _proc(pid)
        alive = pid is not None and m["anon_mb"] > 0
        found[who] = {
            "pid": pid if alive else None,
            **{key: round(m[key], 1) for key in m if key.endswith("_mb")},
        }
    return found


class Run:
    """The run's processes: the broker, the overlord (on the simulated clock) and the host."""

    def __init__(self, root: Path, args: argparse.Namespace) -> None:
        self.root, self.args = root, args
        self.jars = default_jar_cache()
        self.broker = LocalKafka(root / "kafka", self.jars)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.wall_start = time.time()
        self.overlord: LocalService | None = None
        self.host: subprocess.Popen[str] | None = None
        self.env = {
            **os.environ,
            "SLUICEGATE_PORT": str(self.port),
            "SLUICEGATE_METADATA_URL": f"sqlite:///{root / 'meta.db'}",
            "SLUICEGATE_DEEP_STORAGE": str(root / "deep"),
            "SLUICEGATE_WORK_DIR": str(root / "work"),
            "SLUICEGATE_JAR_CACHE": str(self.jars),
            "SLUICEGATE_LOG_LEVEL": "warning",
            "SLUICEGATE_LEASE_S": "3",
            "SLUICEGATE_COORDINATOR_PERIOD_S": "10",
            # what is kept for a while is kept a few minutes, so that every retention window
            # is full before the slopes' fit begins (at a sixth of the run: 10 minutes of 60).
            # A dropped day's files go with the snapshots that name them: the drop rule begins
            # at minute 7 and the kill a minute later, so snapshots are kept 2 minutes (with 5,
            # deep storage fell from its peak until minute 17)
            "SLUICEGATE_SNAPSHOT_RETENTION": "PT2M",
            "SLUICEGATE_KILL_ON": "true",
            "SLUICEGATE_KILL_PERIOD_S": "30",
            "SLUICEGATE_KILL_BUFFER_PERIOD": "P1D",
            "SLUICEGATE_KILL_DURATION_TO_RETAIN": "",
            "SLUICEGATE_ORPHAN_FILE_AGE": "PT5M",  # well past a publish's staging
            "SLUICEGATE_TASK_RETENTION": "PT5M",
            "SLUICEGATE_INTENT_RETENTION": "PT5M",
            "SLUICEGATE_WORKER_RETENTION": "PT5M",  # a host killed leaves its row; a new one comes
            # the host application's log is cut at 1 MiB, not 64 (full after ~15 hours here)
            "SLUICEGATE_APP_LOG_MAX_MB": "1",
            "SLUICEGATE_JANITOR_PERIOD_S": "60",
            "SLUICEGATE_ORPHAN_TIMEOUT_S": str(ORPHAN_TIMEOUT_S),
            # the overlord logs its memory by allocator every minute (overlord.log), and what
            # holds the objects that grew most, and Iceberg's tables and their metadata, every
            # --owners-every reports
            "SLUICEGATE_MEMORY_REPORT_S": "60",
            "SLUICEGATE_MEMORY_OWNERS_EVERY": str(args.owners_every),
            "SLUICEGATE_MEMORY_OWNERS_OF": "pyiceberg.table.Table,pyiceberg.table.Transaction,"
            "pyiceberg.table.metadata.TableMetadataV2",
        }
        if args.trace_allocations:  # the overlord logs where its memory grew (overlord.log)
            self.env["SLUICEGATE_TRACE_ALLOCATIONS_S"] = str(args.trace_allocations)

    def at_s(self) -> float:
        """Seconds since the run began (every sample's and event's time)."""
        return round(time.time() - self.wall_start, 1)

    def simulated_now(self) -> float:
        return ORIGIN + (time.time() - self.wall_start) * SPEED

    def start_overlord(self) -> None:
        command = [sys.executable, "-m", "supervisor.testkit.simclock"]
        command += [str(self.wall_start), str(ORIGIN), str(SPEED), "serve"]
        log = self.root / "overlord.log"
        env = {**self.env, **dict(self.args.overlord_env)}
        self.overlord = LocalService(command, self.url, log, self.root, env)
        self.overlord.start(120)

    def stop_overlord(self) -> None:
        process = self.overlord.process if self.overlord is not None else None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(120)

    def start_host(self) -> None:
        work = self.root / "host"
        command = [sys.executable, "-m", "supervisor.cli", "worker", "--overlord", self.url]
        capacity = str(2 * self.args.supervisors + 4)
        command += ["--capacity", capacity, "--port", str(free_port()), "--work-dir", str(work)]
        command += ["--master", "local[2]"]
        with (self.root / "host.log").open("ab") as log:
            self.host = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=self.env,
                start_new_session=True,
            )
        assert self.host.stdout is not None
        line = self.host.stdout.readline()
        assert "registered" in line, line

    def kill_host(self) -> None:
        """The task host lost: its agent and its application SIGKILLed."""
        if self.host is not None and self.host.poll() is None:
            os.killpg(self.host.pid, signal.SIGKILL)
            self.host.wait(30)
        kill_tasks(self.root / "host")

    def stop_host(self) -> None:
        if self.host is not None and self.host.poll() is None:
            self.host.send_signal(signal.SIGTERM)
            self.host.wait(60)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        answer = httpx.request(method, self.url + path, json=body, timeout=30)
        assert answer.is_success, (path, answer.status_code, answer.text)
        return answer.json() if answer.content else None


class Producer:
    """`rate` records a second to each topic, event time on the run's simulated clock; the
    words sent, by datasource, with their event day."""

    def __init__(self, run: Run, topics: dict[str, str], rate: float) -> None:
        from confluent_kafka import Producer as KafkaProducer

        self.run, self.topics, self.rate = run, topics, rate
        self.kafka = KafkaProducer({"bootstrap.servers": run.broker.bootstrap_servers})
        self.sent: dict[str, list[tuple[str, float]]] = {ds: [] for ds in topics}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.stopping.wait(1.0):
            moment = self.run.simulated_now()
            stamp = datetime.fromtimestamp(moment, UTC).isoformat()
            for ds, topic in self.topics.items():
                for _ in range(int(self.rate)):
                    word = f"{ds}-{n}"
                    n += 1
                    record = json.dumps({"ts": stamp, "word": word}).encode()
                    self.kafka.produce(topic, record)
                    self.sent[ds].append((word, moment))
            self.kafka.flush(30)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(60)
        self.kafka.flush(30)


def submit(run: Run, count: int) -> dict[str, str]:
    # 20 datasources close a day a minute each; compact tasks end in ~1.5 s, but the default
    # two slots a 10 s coordinator period launch 12 a minute: half the host's slots, at most
    # six (Druid's operators raise compactionTaskSlotRatio and maxCompactionTaskSlots so)
    slots = {"compactionTaskSlotRatio": 0.5, "maxCompactionTaskSlots": 6}
    run.api("POST", "/druid/coordinator/v1/config/compaction/cluster", slots)
    topics = {}
    for i in range(count):
        ds, topic = f"soak{i:02d}", f"soak-{i:02d}"
        create_topic(run.broker.bootstrap_servers, topic, 1)
        spec = supervisor_spec(
            ds,
            topic,
            run.broker.bootstrap_servers,
            ["word"],
            segment_granularity="DAY",
            tuning={"intermediateHandoffPeriod": "PT5S"},
            period="PT10S",
            taskDuration="PT30S",
        )
        run.api("POST", "/druid/indexer/v1/supervisor", spec)
        rules = [{"type": "dropBeforeByPeriod", "period": "P7D"}]
        run.api("POST", f"/druid/coordinator/v1/rules/{ds}", rules)
        compaction = {"dataSource": ds, "skipOffsetFromLatest": "P1D"}
        run.api("POST", "/druid/coordinator/v1/config/compaction", compaction)
        topics[ds] = topic
    return topics


def sample(run: Run, datasources: list[str]) -> dict[str, Any]:
    import sqlite3

    overlord = run.overlord.process.pid if run.overlord and run.overlord.process else None
    app = application_pid(run.root / "host")
    db = sqlite3.connect(f"file:{run.root / 'meta.db'}?mode=ro", uri=True, timeout=30)
    try:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {name: db.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0] for name in names}
        pages = {
            pragma: db.execute(f"PRAGMA {pragma}").fetchone()[0]
            for pragma in ("page_count", "freelist_count", "page_size")
        }
        table_mb = _table_mb(db)
    finally:
        db.close()
    files_mb = {
        p.name: round(p.stat().st_size / 1e6, 3) for p in run.root.glob("meta.db*") if p.is_file()
    }
    db_mb = sum(files_mb.values())
    deep = run.root / "deep"
    files = {ds: sum(1 for p in (deep / ds).rglob("*") if p.is_file()) for ds in datasources}
    return {
        "at_s": run.at_s(),
        "overlord": _proc(overlord),
        "host_app": _proc(app),
        "db_mb": round(db_mb, 3),
        "rows": rows,
        "db_files_mb": files_mb,
        "db_pages": pages,
        "table_mb": table_mb,
        "deep_mb": round(_mb(deep), 3),
        "deep_files": sum(files.values()),
        "work_mb": round(_mb(run.root / "work") + _mb(run.root / "host"), 3),
        "tmp_spark_dirs": _spark_tmp(),
    }


def _table_mb(db: Any) -> dict[str, float]:
    """MB of pages per table and index (SQLite's dbstat), the biggest ten; empty when this
    SQLite was built without it."""
    import sqlite3

    try:
        query = "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 10"
        return {name: round(size / 1e6, 3) for name, size in db.execute(query)}
    except sqlite3.Error:
        return {}


def _spark_tmp() -> int:
    """Spark folders in the system's temporary directory (none should pile up there)."""
    import tempfile

    root = Path(tempfile.gettempdir())
    return sum(1 for p in root.iterdir() if p.name.startswith(("spark-", "blockmgr-")))


def check_tables(run: Run, producer: Producer) -> dict[str, Any]:
    """Every table read with pyiceberg: dupes, lost (among days the drop rule had not
    reached), files per closed day."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("sluicegate", uri=f"sqlite:///{run.root / 'meta.db'}")
    now = run.simulated_now()
    safe_after = now - 7 * DAY_S + 2 * DAY_S  # past the day being dropped as we read
    lost = dupes = 0
    per_interval: list[int] = []
    for ds, sent in producer.sent.items():
        table = catalog.load_table(f"druid.{ds}")
        words = Counter(table.scan().to_arrow().column("word").to_pylist())
        dupes += sum(count - 1 for count in words.values() if count > 1)
        lost += sum(1 for word, moment in sent if moment >= safe_after and word not in words)
        days = Counter(str(task.file.partition[0]) for task in table.scan().plan_files())
        # the newest day is open, the one before it closed within the last (simulated) day:
        # compaction has had a day for every other
        recent = sorted(days)[-2:]
        per_interval += [count for day, count in days.items() if day not in recent]
    p99 = percentile(sorted(per_interval), 99) if per_interval else float("nan")
    return {"lost": lost, "dupes": dupes, "files_per_interval_p99": p99}


def soak(run: Run, args: argparse.Namespace) -> dict[str, Any]:
    run.broker.start()
    run.start_overlord()
    run.start_host()
    topics = submit(run, args.supervisors)
    producer = Producer(run, topics, args.rate)
    producer.thread.start()
    samples: list[dict[str, Any]] = []
    memories: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    started = time.monotonic()
    end = started + args.minutes * 60
    next_sample = next_memory = started
    next_kill = started + args.host_kill_every_min * 60
    # by default half way, and half a kill period from the host's kills (a host application
    # started while the overlord is away warms up late)
    restart_min = args.overlord_restart_min
    if restart_min is None:
        restart_min = args.minutes / 2 + args.host_kill_every_min / 2
    restart_at: float | None = started + restart_min * 60
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_sample:
            samples.append(sample(run, list(topics)))
            next_sample += args.sample_s
            print(json.dumps(samples[-1], default=str)[:400], flush=True)
        if now >= next_memory:
            memories.append(memory(run))
            next_memory = max(next_memory + args.memory_sample_s, now)
        if now >= next_kill:
            run.kill_host()
            run.start_host()
            events.append({"at_s": run.at_s(), "event": "task host SIGKILLed"})
            next_kill += args.host_kill_every_min * 60
        if restart_at is not None and now >= restart_at:
            run.stop_overlord()
            run.start_overlord()
            events.append({"at_s": run.at_s(), "event": "overlord restarted"})
            restart_at = None
        time.sleep(1.0)
    producer.stop()
    for ds in topics:  # every supervisor catches up
        count = len(producer.sent[ds])
        wait_for(
            lambda ds=ds, count=count: _committed(run, ds) >= count,
            600,
            f"{ds} to publish its {count} records",
        )
    time.sleep(30)  # a run of the rules past the last publish
    # files per compacted interval: compaction catches up with the last days first
    checked = check_tables(run, producer)
    return {"samples": samples, "memory": memories, "events": events, **checked}


def _committed(run: Run, ds: str) -> int:
    status = run.api("GET", f"/druid/indexer/v1/supervisor/{ds}/status")
    return int(sum((status["payload"].get("committedOffsets") or {}).values()))


def shut_down(run: Run) -> tuple[int, float]:
    """Stop every service the run started (the agent and the overlord with SIGTERM, as an
    operator would; the host application is left to end by itself, as it does when nothing
    adopts it). How many of the run's processes are alive a bound later (the orphan timeout
    and a minute), and how long the last one took to end."""
    run.stop_host()
    run.stop_overlord()
    run.broker.stop()
    marker = str(run.root).encode()
    stopped = time.monotonic()
    deadline = stopped + ORPHAN_TIMEOUT_S + 60
    alive: list[int] = with_marker(marker, besides=os.getpid())
    while alive and time.monotonic() < deadline:
        time.sleep(1)
        alive = with_marker(marker, besides=os.getpid())
    took = time.monotonic() - stopped
    for pid in alive:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            continue
    return len(alive), took


def slopes(
    samples: list[dict[str, Any]], memories: list[dict[str, Any]], skip_s: float
) -> dict[str, Any]:
    """Each series' least-squares slope from `skip_s` on. Memory is fitted life by life
    (bench/fits.py; a life is a pid), on the processes' anonymous proportional resident memory
    (`_proc`): each of the overlord's two lives from `skip_s` after it was first seen, each of
    the host application's from `HOST_WARMUP_S`. `rss_mb` is the sum of the two within-life
    slopes. The DB is its main file (`db_mb`: before 2026-12-02's second run, the fit was over
    the file and its WAL, `db_all_mb` now); SQLite's WAL, which a checkpoint empties and whose
    size is bounded (8 MiB once it restarts), is its own series."""
    found = _slopes(
        samples,
        skip_s,
        {
            "db_mb": lambda s: s["db_files_mb"].get("meta.db", 0.0),
            "db_wal_mb": lambda s: s["db_files_mb"].get("meta.db-wal", 0.0),
            "db_all_mb": lambda s: s["db_mb"],
            "disk_mb": lambda s: s["deep_mb"] + s["work_mb"],
            "open_files": lambda s: s["overlord"]["open_files"] + s["host_app"]["open_files"],
            "threads": lambda s: s["overlord"]["threads"] + s["host_app"]["threads"],
        },
    )
    for name, who, warmup in (
        ("overlord_rss_mb", "overlord", skip_s),
        ("host_rss_mb", "host_app", HOST_WARMUP_S),
    ):
        series = [(m["at_s"], m[who]["pid"], m[who]["anon_mb"]) for m in memories]
        points, starts = by_life(series)  # the lives from their real starts, then the fit's
        points = [(t, v) for t, v in points if t >= skip_s]
        fit = life_slopes(points, starts, warmup)
        warmed = lives(points, starts, warmup)
        envelope = envelopes(warmed, ENVELOPE_WINDOW_S)
        late = common_slope_per_h(late_halves(warmed))
        found[name] = {
            "slope_per_h": round(fit["within_per_h"], 3),
            "share_of_mean_per_h": _share(fit["within_per_h"], fit["mean"]),
            "lives_slope_per_h": round(fit["across_per_h"], 3),
            "lives": fit["lives"],
            "mean_mb": round(fit["mean"], 1),
            **_envelope_fields(envelope, fit["mean"]),
            **_late_fields(late, fit["mean"]),
        }
    within = found["overlord_rss_mb"]["slope_per_h"] + found["host_rss_mb"]["slope_per_h"]
    mean = found["overlord_rss_mb"]["mean_mb"] + found["host_rss_mb"]["mean_mb"]
    found["rss_mb"] = {"slope_per_h": round(within, 3), "share_of_mean_per_h": _share(within, mean)}
    return found


def _share(per_h: float, mean: float) -> float:
    """A slope as a share of its series' mean (nan when there is no mean)."""
    return round(per_h / mean, 4) if mean and not math.isnan(mean) else float("nan")


def _slopes(samples: list[dict[str, Any]], skip_s: float, series: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, value in series.items():
        points = [(s["at_s"], value(s)) for s in samples if s["at_s"] >= skip_s]
        per_h = slope_per_h(points)
        mean = sum(v for _, v in points) / len(points) if points else float("nan")
        found[name] = {
            "slope_per_h": round(per_h, 3),
            "share_of_mean_per_h": _share(per_h, mean),
            "max": round(max((v for _, v in points), default=float("nan")), 3),
            **_envelope_fields(envelopes([points], ENVELOPE_WINDOW_S), mean),
            **_late_fields(common_slope_per_h(late_halves([points])), mean),
        }
    return found


def _late_fields(per_h: float, mean: float) -> dict[str, Any]:
    """The slope of a series' second half (of each life's, for memory): a plateau's is flat
    where the whole line still slopes by the early climb."""
    return {"late_slope_per_h": round(per_h, 3), "late_share_of_mean_per_h": _share(per_h, mean)}


def _envelope_fields(envelope: dict[str, Any], mean: float) -> dict[str, Any]:
    """The slopes of a series' peaks and floors per window, in its unit and as shares of its
    mean, per hour."""
    return {
        "peaks_slope_per_h": round(envelope["peaks_per_h"], 3),
        "floors_slope_per_h": round(envelope["floors_per_h"], 3),
        "peaks_share_of_mean_per_h": _share(envelope["peaks_per_h"], mean),
        "floors_share_of_mean_per_h": _share(envelope["floors_per_h"], mean),
        "envelope_windows": envelope["windows"],
    }


def _variable(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not name or not equals:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--supervisors", type=int, default=20)
    parser.add_argument("--rate", type=float, default=5.0, help="records/s per supervisor")
    parser.add_argument("--sample-s", type=float, default=60.0)
    parser.add_argument(
        "--memory-sample-s", type=float, default=10.0, help="seconds between memory samples"
    )
    parser.add_argument("--host-kill-every-min", type=float, default=10.0)
    parser.add_argument(
        "--overlord-restart-min",
        type=float,
        help="minute of the run at which the overlord is stopped and started"
        " (default: half way, plus half a host-kill period)",
    )
    parser.add_argument("--keep", help="run in a directory under this one and keep it")
    parser.add_argument(
        "--owners-every", type=int, default=10, help="memory reports between owners' walks"
    )
    parser.add_argument(
        "--trace-allocations",
        type=float,
        help="seconds: the overlord logs where its Python allocations grew (tracemalloc)",
    )
    parser.add_argument(
        "--overlord-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_variable,
        help="a variable of the overlord's environment alone (repeatable), e.g."
        " SLUICEGATE_PYTHON_ALLOCATOR=pymalloc",
    )
    parser.add_argument(
        "--refit",
        metavar="SOAK_JSON",
        help="run nothing: fit a kept run's soak.json again and print its RATIO",
    )
    args = parser.parse_args()
    if args.refit:
        refit(Path(args.refit))
        return
    with workspace("soak-", args.keep) as root:
        run = Run(root, args)
        try:
            found = soak(run, args)
        finally:
            left_alive, last_exit_s = shut_down(run)
    fitted = slopes(found["samples"], found["memory"], args.minutes * 60 / 6)
    results = {
        "args": vars(args),
        "slopes": fitted,
        "left_alive": left_alive,
        "last_exit_s": round(last_exit_s, 1),
        **found,
    }
    path = write_results("soak", results)
    print(f"wrote {path}")
    if args.keep:  # beside the run's files too: bench/results/ goes with the tree it ran from
        kept = root / "soak.json"
        kept.write_text(path.read_text())
        print(f"wrote {kept}")
    print(ratio_line(args.minutes, fitted, results))


def refit(path: Path) -> None:
    """A kept run's samples fitted as this version of the soak fits them (its slopes are
    replaced in the file's copy printed from, not in the file)."""
    try:
        results = json.loads(path.read_text())
        minutes = float(results["args"]["minutes"])
        fitted = slopes(results["samples"], results["memory"], minutes * 60 / 6)
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"soak.py: --refit {path}: not a soak's results ({error})")
    print(json.dumps(fitted, indent=1))
    print(ratio_line(minutes, fitted, results))


def ratio_line(minutes: float, fitted: dict[str, Any], results: dict[str, Any]) -> str:
    """The RATIO line: the issue's fields, then the envelopes' (the DB's and the disk's peaks
    and floors per ten minutes, the overlord's within its lives), then the second halves'."""
    return (
        f"RATIO hours={minutes / 60:.2f}"
        f" rss_mb_slope_per_h={fitted['rss_mb']['slope_per_h']}"
        f" overlord_rss_mb_slope_per_h={fitted['overlord_rss_mb']['slope_per_h']}"
        f" host_rss_mb_slope_per_h={fitted['host_rss_mb']['slope_per_h']}"
        f" host_lives_mb_slope_per_h={fitted['host_rss_mb']['lives_slope_per_h']}"
        f" db_mb_slope_per_h={fitted['db_mb']['slope_per_h']}"
        f" disk_mb_slope_per_h={fitted['disk_mb']['slope_per_h']}"
        f" files_per_interval_p99={results['files_per_interval_p99']}"
        f" lost={results['lost']} dupes={results['dupes']} left_alive={results['left_alive']}"
        f" overlord_floors_mb_slope_per_h={fitted['overlord_rss_mb']['floors_slope_per_h']}"
        f" db_peaks_mb_slope_per_h={fitted['db_mb']['peaks_slope_per_h']}"
        f" db_floors_mb_slope_per_h={fitted['db_mb']['floors_slope_per_h']}"
        f" disk_peaks_mb_slope_per_h={fitted['disk_mb']['peaks_slope_per_h']}"
        f" disk_floors_mb_slope_per_h={fitted['disk_mb']['floors_slope_per_h']}"
        f" overlord_late_mb_slope_per_h={fitted['overlord_rss_mb']['late_slope_per_h']}"
        f" db_late_mb_slope_per_h={fitted['db_mb']['late_slope_per_h']}"
        f" disk_late_mb_slope_per_h={fitted['disk_mb']['late_slope_per_h']}"
    )


if __name__ == "__main__":
    main()
