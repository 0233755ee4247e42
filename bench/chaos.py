"""Exactly-once under faults: seeded chaos runs on the whole real stack.

Each run starts a stack of its own: a Kafka broker, PostgreSQL (the metadata DB), an S3
server (deep storage), a Spark standalone cluster of two workers, two overlords on the one
DB (one leads, the other follows) and two task hosts (`sluicegate worker`, each with its
shared application on the cluster). The overlords and each task host run in a network
namespace of their own on a private bridge (bench/network.py), the services on the bridge's
address, so that a task host and the overlords can be cut apart (needs root and iproute2).
Two producers write numbered records ({"n": ...}) to three topics without pause: an
idempotent one, and a transactional one that commits some transactions and aborts others.
Two supervisors read them with taskCount 2, replicas 2 and a short taskDuration: `main` one
topic of three partitions, `pattern` a topicPattern that matches two topics of two.

The seed draws the run's faults: their kinds (by weight), targets, how long each lasts and
when it begins. They are injected one after another while the producers run. After the last
one the run waits until each supervisor's committed offsets reach where its partitions ended
when the fault ended (the recovery time; a run that has not caught up within --stuck-s is
*stuck*), stops the producers, waits until the committed offsets reach the logs' ends, and
reads each supervisor's Iceberg table with pyiceberg: each committed record of its topics must
be in it exactly once, no record of an aborted transaction at all, its files must be the used
segments' and its latest snapshot must hold the committed offsets.

    .venv/bin/python bench/chaos.py                      # seeds 10-59: every kind 5+ times
    .venv/bin/python bench/chaos.py --seed 7 --runs 1 --kinds leader_kill,broker_kill --keep /tmp/c
    .venv/bin/python bench/chaos.py --report bench/results/chaos-10-29.json chaos-30-59.json

`--seed S --runs N` replays runs S, S+1, ... S+N-1: the same faults in the same order at the
same moments (what the stack does in between is what it is). Prints a line per run, a table,
and `RATIO runs=N ok=N dupes=0 missing=0 stuck=0 recovery_p99_s=... recovery_max_s=...`;
bench/results/chaos-S-<S+N-1>.json holds every run with its faults, and `--report` prints
the table and RATIO of several such files (a sweep run in parts). `make chaos` runs the
default 50.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from sqlalchemy import select  # noqa: E402

from bench.common import stop_on_sigterm, write_results  # noqa: E402
from supervisor.db.models import CommittedOffsetsRow, SegmentRow, TaskRow  # noqa: E402
from supervisor.devstack.certs import Certs, self_signed  # noqa: E402
from supervisor.devstack.kafka import LocalKafka  # noqa: E402
from supervisor.devstack.postgres import LocalPostgres  # noqa: E402
from supervisor.devstack.s3 import LocalS3  # noqa: E402
from supervisor.devstack.spark import LocalSparkCluster  # noqa: E402
from supervisor.devstack.specs import supervisor_spec  # noqa: E402
from supervisor.devstack.topics import create_topic  # noqa: E402
from supervisor.net import free_port  # noqa: E402
from supervisor.settings import Settings  # noqa: E402
from supervisor.testkit.hosts import application_pid  # noqa: E402
from supervisor.testkit.network import Network  # noqa: E402
from supervisor.testkit.numbers import Numbers  # noqa: E402
from supervisor.testkit.overlord import ADMIN, Overlord  # noqa: E402
from supervisor.testkit.service import BASE  # noqa: E402
from supervisor.testkit.waits import percentile  # noqa: E402

# kind -> weight: how often the seed draws it
WEIGHTS: dict[str, int] = {
    "task_kill": 3,  # SIGKILL the application that runs a task (its host's shared one)
    "task_stop": 2,  # SIGSTOP it past the overlord's timeouts, then SIGCONT: zombie tasks
    "leader_kill": 2,  # SIGKILL the leading overlord, started again after a while
    "leader_stop": 2,  # SIGSTOP the leader past its lease, then SIGCONT
    "overlords_restart": 1,  # both overlords SIGKILLed and started again together
    "broker_kill": 1,  # SIGKILL the broker, started again on its port and data
    "postgres_restart": 1,  # PostgreSQL stopped at once (immediate), started again
    "host_kill": 1,  # a task host (its agent and its application) SIGKILLed, started again
    "spark_worker_kill": 1,  # a Spark worker and its executors SIGKILLed, started again
    "storage_outage": 1,  # the S3 server stopped for a while
    "partition": 1,  # a task host and the overlords cut apart (both ways) for a while
    "partitions_added": 1,  # a partition added to a topic
    "spec_update": 1,  # a supervisor's spec posted again with a change
    "suspend_resume": 1,  # a supervisor suspended, resumed after a while
    "handoff": 1,  # early handoff of a supervisor's task groups
    "reset_committed": 1,  # resetOffsets of a partition to its committed offset
}
# how long a kind's fault lasts (seconds, drawn uniformly): a stop's or an outage's length,
# how long a killed process stays down
HOLD_S: dict[str, tuple[float, float]] = {
    "task_stop": (20.0, 40.0),
    "leader_kill": (2.0, 10.0),
    "leader_stop": (5.0, 12.0),
    "overlords_restart": (1.0, 5.0),
    "broker_kill": (2.0, 15.0),
    "postgres_restart": (2.0, 10.0),
    "host_kill": (5.0, 20.0),
    "spark_worker_kill": (5.0, 20.0),
    "storage_outage": (5.0, 30.0),
    "partition": (5.0, 30.0),  # below and above the worker timeout: a host lost and back
    "suspend_resume": (3.0, 15.0),
}
LEASE_S = 3  # the overlords' leader lease (tests/e2e/harness.py)
WORKER_TIMEOUT_S = 8  # a task host that has not heartbeaten this long is gone
SUPERVISORS = ("main", "pattern")
HOSTS = ("host-a", "host-b")  # the task hosts, each a machine of the run's network
LONG_S = 600.0  # bounds on the stack's own steps (a loaded 2-core machine)
# The default sweep's first seed: seeds 10-59 draw every kind at least 5 times with the
# default 4 faults a run (seeds 1-50 draw host_kill 3 times; tests/unit/test_chaos_schedule.py)
FIRST_SEED = 10


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the faults began
    kind: str
    target: int  # which of its candidates (an index, modulo their count when injected)
    hold: float


def schedule(seed: int, count: int, window: float, kinds: list[str]) -> list[Fault]:
    """The run's faults, by the seed alone: `count` of the `kinds`, drawn by weight, at
    moments in `window` seconds."""
    rng = random.Random(seed)
    weights = [WEIGHTS[k] for k in kinds]
    faults = []
    for _ in range(count):
        kind = rng.choices(kinds, weights)[0]
        low, high = HOLD_S.get(kind, (0.0, 0.0))
        faults.append(
            Fault(
                at=round(rng.uniform(0, window), 1),
                kind=kind,
                target=rng.randrange(1 << 16),
                hold=round(rng.uniform(low, high), 1),
            )
        )
    return sorted(faults, key=lambda f: f.at)


# ---- the records ------------------------------------------------------------------------------


# ---- the stack --------------------------------------------------------------------------------


class Host:
    """A task host (`sluicegate worker`) on a fixed address and port in a network namespace of
    its own (the machine `machine` of the run's network), so that a restart is the same host."""

    def __init__(
        self,
        root: Path,
        machine: str,
        network: Network,
        tls: Certs,
        overlords: list[str],
        env: dict[str, str],
    ) -> None:
        self.machine, self.network, self.tls = machine, network, tls
        self.port = free_port()
        self.work = root / machine
        self.log = root / f"{machine}.log"
        self.overlords, self.env = overlords, env
        self.process: subprocess.Popen[str] | None = None

    @property
    def name(self) -> str:
        return f"{self.network.address(self.machine)}:{self.port}"

    def start(self) -> None:
        command = [sys.executable, "-m", "supervisor.cli", "worker"]
        command += ["--overlord", ",".join(self.overlords), "--capacity", "10"]
        command += ["--host", self.network.address(self.machine), "--port", str(self.port)]
        command += ["--work-dir", str(self.work)]
        command += ["--tls-cert", str(self.tls.cert), "--tls-key", str(self.tls.key)]
        command = self.network.command(self.machine, command)
        deadline = time.monotonic() + LONG_S
        while True:  # the overlords may be down (a fault): until one takes it
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(
                    command,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                    env=self.env,
                    start_new_session=True,
                )
            assert self.process.stdout is not None
            line = self.process.stdout.readline()
            if line.startswith(f"task host {self.name} registered"):
                return
            self.process.wait(30)
            if time.monotonic() > deadline:
                raise RuntimeError(f"task host {self.name} did not register: see {self.log}")
            time.sleep(2)

    def application(self) -> int | None:
        """The pid of its shared application, if one runs."""
        pid = application_pid(self.work)
        with suppress(OSError):
            if pid is not None:
                os.kill(pid, 0)
                return pid
        return None

    def kill9(self) -> None:
        """The agent and its application, as a machine's death would take them."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        pid = self.application()
        if pid is not None:
            with suppress(OSError):
                os.killpg(pid, signal.SIGKILL)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(30)
        self.kill9()


@dataclass
class Stack:
    root: Path
    network: Network
    verify: ssl.SSLContext  # trusts the run's CA, whose certificate the overlords serve
    kafka: LocalKafka
    postgres: LocalPostgres
    s3: LocalS3
    cluster: LocalSparkCluster
    overlords: list[Overlord]
    hosts: list[Host]
    db_url: str
    prefix: str
    topics: dict[str, list[str]] = field(default_factory=dict)  # supervisor -> its topics

    def leader(self) -> Overlord | None:
        for overlord in self.overlords:
            if not overlord.exited() and overlord.leads():
                return overlord
        return None

    def api(self) -> httpx.Client:
        """A client of the overlords: any that answers (a follower redirects writes)."""
        for overlord in self.overlords:
            if not overlord.exited():
                return httpx.Client(
                    base_url=overlord.url,
                    timeout=30,
                    auth=Overlord.auth,
                    verify=self.verify,
                    follow_redirects=True,
                )
        raise RuntimeError("no overlord runs")

    def rows(self, query: Any) -> list[Any]:
        return self.overlords[0].rows(query)

    def committed_row(self, sid: str) -> tuple[int, dict[str, int]] | None:
        rows = self.rows(
            select(CommittedOffsetsRow.version, CommittedOffsetsRow.offsets).where(
                CommittedOffsetsRow.supervisor_id == sid
            )
        )
        return (int(rows[0][0]), dict(rows[0][1])) if rows else None

    def committed(self) -> dict[str, dict[str, int]]:
        rows = self.rows(select(CommittedOffsetsRow.supervisor_id, CommittedOffsetsRow.offsets))
        return {sid: dict(offsets) for sid, offsets in rows}

    def log_ends(self) -> dict[str, dict[str, int]]:
        """Each supervisor's partitions' last stable offsets, keyed as its committed offsets
        are ("0" for one topic, "topic:0" for a pattern's)."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap_servers, "log_level": 0})
        metadata = admin.list_topics(timeout=30)
        ends: dict[str, dict[str, int]] = {}
        for sid, topics in self.topics.items():
            request = {
                TopicPartition(topic, p): OffsetSpec.latest()  # type: ignore[no-untyped-call]
                for topic in topics
                for p in metadata.topics[topic].partitions
            }
            futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED)
            ends[sid] = {
                (str(tp.partition) if sid == "main" else f"{tp.topic}:{tp.partition}"): (
                    future.result(30).offset
                )
                for tp, future in futures.items()
            }
        return ends


@contextmanager
def stack(root: Path, seed: int) -> Iterator[Stack]:
    """The services listen on the network's bridge address; the overlords (both) run in a
    namespace of their own, and each task host in one, so a partition can come between."""
    jar_cache = Settings().jar_cache
    with ExitStack() as stop:
        network = Network(("overlords", *HOSTS)).up()
        stop.callback(network.down)
        here = network.services
        tls = self_signed(root / "tls", addresses=(here, *network.addresses.values()))
        kafka = LocalKafka(root / "kafka", jar_cache, host=here).start()
        stop.callback(kafka.stop)
        postgres = LocalPostgres(root / "pg", host=here, network=network.subnet).start()
        stop.callback(postgres.stop)
        db_url = postgres.create_database(f"chaos{seed}")
        s3 = LocalS3(root / "s3", "segments", "chaos-key", "chaos-secret-1", host=here).start()
        stop.callback(s3.stop)
        cluster = LocalSparkCluster(
            root / "spark", workers=2, cores=4, memory="4g", host=here
        ).start()
        stop.callback(cluster.stop)
        prefix = f"chaos-{seed}"
        shared = {
            **s3.environment(),
            "SSL_CERT_FILE": str(tls.ca),
            "SLUICEGATE_TASK_MASTER": cluster.url,
            "SLUICEGATE_TASK_EXECUTOR_MEMORY": "1g",
            "SLUICEGATE_TASK_CORES": "2",
        }
        overlords = [
            Overlord(
                root,
                jar_cache,
                db_url,
                name,
                address=network.address("overlords"),
                tls=tls,
                netns=network.netns("overlords"),
            )
            for name in ("a", "b")
        ]
        for overlord in overlords:
            overlord.env.update(
                {
                    **shared,
                    "SLUICEGATE_DEEP_STORAGE": f"s3://segments/{prefix}",
                    "SLUICEGATE_WORKER_TIMEOUT_S": str(WORKER_TIMEOUT_S),
                    "SLUICEGATE_LEASE_S": str(LEASE_S),
                }
            )
            overlord.start()
            stop.callback(overlord.stop)
        host_env = {
            **os.environ,
            **shared,
            "SLUICEGATE_JAR_CACHE": str(jar_cache),
            "SLUICEGATE_USER": ADMIN[0],
            "SLUICEGATE_PASSWORD": ADMIN[1],
        }
        urls = [o.url for o in overlords]
        hosts = [Host(root, name, network, tls, urls, host_env) for name in HOSTS]
        for host in hosts:
            host.start()
            stop.callback(host.stop)
        verify = ssl.create_default_context(cafile=str(tls.ca))
        yield Stack(
            root, network, verify, kafka, postgres, s3, cluster, overlords, hosts, db_url, prefix
        )


def chaos_spec(
    sid: str, bootstrap: str, topic: str = "", pattern: str | None = None, **changes: Any
) -> dict[str, Any]:
    return supervisor_spec(
        sid,
        topic,
        bootstrap,
        [{"type": "long", "name": "n"}],
        metrics=[{"type": "count", "name": "count"}],
        tuning={"maxRowsInMemory": changes.pop("maxRowsInMemory", 5000)},
        period="PT2S",
        completionTimeout="PT2M",
        repartitionTransitionDuration="PT10S",
        taskCount=2,
        replicas=2,
        taskDuration="PT30S",
        **({"topicPattern": pattern} if pattern else {}),
        **changes,
    )


# ---- the faults -------------------------------------------------------------------------------


class Injector:
    """Injects faults into a stack; each call returns once the fault is over (what was
    stopped runs again), saying what it did."""

    def __init__(self, stack: Stack, specs: dict[str, dict[str, Any]]) -> None:
        self.stack, self.specs = stack, specs
        self.updates = 0

    def __call__(self, fault: Fault) -> str:
        method: Callable[[Fault], str] = getattr(self, fault.kind)
        return method(fault)

    def _application(self, fault: Fault) -> tuple[Host, int] | None:
        """The fault's target among the hosts' running applications (the process of a task)."""
        running = [(h, pid) for h in self.stack.hosts if (pid := h.application()) is not None]
        return running[fault.target % len(running)] if running else None

    def task_kill(self, fault: Fault) -> str:
        if (target := self._application(fault)) is None:
            return "no application ran"
        host, pid = target
        os.killpg(pid, signal.SIGKILL)
        return f"SIGKILL {host.name}'s application"

    def task_stop(self, fault: Fault) -> str:
        if (target := self._application(fault)) is None:
            return "no application ran"
        host, pid = target
        os.killpg(pid, signal.SIGSTOP)
        try:
            time.sleep(fault.hold)
        finally:
            with suppress(OSError):
                os.killpg(pid, signal.SIGCONT)
        return f"SIGSTOP {host.name}'s application {fault.hold} s"

    def _leader(self) -> Overlord:
        deadline = time.monotonic() + LONG_S
        while (leader := self.stack.leader()) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("no overlord leads")
            time.sleep(0.5)
        return leader

    def leader_kill(self, fault: Fault) -> str:
        leader = self._leader()
        leader.kill9()
        time.sleep(fault.hold)
        leader.start()
        return f"SIGKILL leader {leader.log.stem}, down {fault.hold} s"

    def leader_stop(self, fault: Fault) -> str:
        leader = self._leader()
        leader.signal(signal.SIGSTOP)
        try:
            time.sleep(fault.hold)
        finally:
            leader.signal(signal.SIGCONT)
        return f"SIGSTOP leader {leader.log.stem} {fault.hold} s"

    def overlords_restart(self, fault: Fault) -> str:
        for overlord in self.stack.overlords:
            if not overlord.exited():
                overlord.kill9()
        time.sleep(fault.hold)
        for overlord in self.stack.overlords:
            overlord.start()
        return f"SIGKILL both overlords, down {fault.hold} s"

    def broker_kill(self, fault: Fault) -> str:
        kafka = self.stack.kafka
        kafka.kill()
        time.sleep(fault.hold)
        kafka.start(LONG_S)
        return f"SIGKILL the broker, down {fault.hold} s"

    def postgres_restart(self, fault: Fault) -> str:
        self.stack.postgres.crash()
        time.sleep(fault.hold)
        self.stack.postgres.start()
        return f"PostgreSQL stopped (immediate), down {fault.hold} s"

    def host_kill(self, fault: Fault) -> str:
        host = self.stack.hosts[fault.target % len(self.stack.hosts)]
        host.kill9()
        time.sleep(fault.hold)
        host.start()
        return f"SIGKILL task host {host.name}, down {fault.hold} s"

    def spark_worker_kill(self, fault: Fault) -> str:
        index = fault.target % self.stack.cluster.workers
        self.stack.cluster.kill_worker(index)
        time.sleep(fault.hold)
        self.stack.cluster.restart_worker(index)
        return f"SIGKILL Spark worker {index}, down {fault.hold} s"

    def storage_outage(self, fault: Fault) -> str:
        self.stack.s3.stop()
        time.sleep(fault.hold)
        self.stack.s3.start(LONG_S)
        return f"S3 server stopped {fault.hold} s"

    def partition(self, fault: Fault) -> str:
        """A task host and the overlords cannot reach each other; each still reaches the
        broker, the metadata DB, S3 and the Spark cluster. Past the worker timeout the host
        is lost to the overlords while its tasks read on: zombies once it is healed."""
        host = self.stack.hosts[fault.target % len(self.stack.hosts)]
        network = self.stack.network
        network.partition(host.machine, "overlords")
        try:
            time.sleep(fault.hold)
        finally:
            network.heal(host.machine, "overlords")
        return f"task host {host.name} cut off from the overlords {fault.hold} s"

    def partitions_added(self, fault: Fault) -> str:
        from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]

        topics = [t for ts in self.stack.topics.values() for t in ts]
        topic = topics[fault.target % len(topics)]
        admin = AdminClient({"bootstrap.servers": self.stack.kafka.bootstrap_servers})
        count = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
        admin.create_partitions([NewPartitions(topic, count + 1)])[topic].result(30)
        return f"{topic}: {count} -> {count + 1} partitions"

    def _supervisor(self, fault: Fault) -> str:
        return SUPERVISORS[fault.target % len(SUPERVISORS)]

    def spec_update(self, fault: Fault) -> str:
        sid = self._supervisor(fault)
        self.updates += 1
        body = json.loads(json.dumps(self.specs[sid]))
        body["spec"]["tuningConfig"]["maxRowsInMemory"] = 5000 + self.updates
        self.specs[sid] = body
        with self.stack.api() as api:
            api.post(BASE, json=body).raise_for_status()
        return f"{sid}: spec updated"

    def suspend_resume(self, fault: Fault) -> str:
        sid = self._supervisor(fault)
        with self.stack.api() as api:
            api.post(f"{BASE}/{sid}/suspend").raise_for_status()
        time.sleep(fault.hold)
        with self.stack.api() as api:
            api.post(f"{BASE}/{sid}/resume").raise_for_status()
        return f"{sid}: suspended {fault.hold} s"

    def handoff(self, fault: Fault) -> str:
        sid = self._supervisor(fault)
        with self.stack.api() as api:
            answer = api.post(f"{BASE}/{sid}/taskGroups/handoff", json={"taskGroupIds": [0, 1]})
        return f"{sid}: handoff asked ({answer.status_code})"

    def reset_committed(self, fault: Fault) -> str:
        """resetOffsets of a partition to the offset committed for it: nothing is skipped or
        read twice, unless a publish lands between the read and the reset (said, if the
        offsets' version moved by more than the reset's own step)."""
        sid = self._supervisor(fault)
        before = self.stack.committed_row(sid)
        if before is None:
            return f"{sid}: nothing committed yet"
        version, committed = before
        key = sorted(committed)[fault.target % len(committed)]
        io = self.specs[sid]["spec"]["ioConfig"]
        body = {
            "type": "kafka",
            "partitions": {
                "type": "end",
                "stream": io.get("topic") or io["topicPattern"],
                "partitionOffsetMap": {key: committed[key]},
            },
        }
        with self.stack.api() as api:
            answer = api.post(f"{BASE}/{sid}/resetOffsets", json=body)
        after = self.stack.committed_row(sid)
        raced = after is not None and after[0] > version + 1
        return f"{sid}: {key} reset to its committed {committed[key]} ({answer.status_code})" + (
            " RACED a publish" if raced else ""
        )


# ---- a run ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    seed: int
    faults: list[dict[str, Any]]
    records: int = 0
    duplicates: int = 0
    missing: int = 0
    aborted_published: int = 0
    aborted_produced: int = 0  # records of aborted transactions, to every topic
    uncertain: int = 0
    producer_errors: list[str] = field(default_factory=list)  # the first few
    tasks_failed: int = 0  # by the faults (replaced), in the metadata DB at the end
    stuck: bool = False
    recovery_s: float | None = None
    error: str | None = None
    root: str = ""
    commit: str = ""  # of the code the run ran (a sweep run in parts may span commits)

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and not self.stuck
            and self.duplicates == self.missing == self.aborted_published == 0
        )

    def line(self) -> str:
        kinds = ",".join(f["kind"] for f in self.faults)
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.1f}"
        state = "ok" if self.ok else ("STUCK" if self.stuck else "FAILED")
        return (
            f"seed={self.seed} {state} faults={kinds} records={self.records} "
            f"dupes={self.duplicates} missing={self.missing} aborted={self.aborted_published} "
            f"recovery_s={recovery}" + (f" error={self.error}" if self.error else "")
        )


def caught_up(stack: Stack, target: dict[str, dict[str, int]]) -> bool:
    committed = stack.committed()
    return all(
        all(committed.get(sid, {}).get(key, 0) >= end for key, end in ends.items())
        for sid, ends in target.items()
    )


def wait_until(predicate: Callable[[], bool], timeout: float, every: float = 1.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with suppress(Exception):  # a fault's aftermath (the DB restarting) is not an answer
            if predicate():
                return True
        time.sleep(every)
    return False


def head() -> str:
    """The checkout's commit, with "+" when it has changes not committed."""

    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+" if git("status", "--porcelain") else "")


def run_once(seed: int, args: argparse.Namespace) -> Outcome:
    faults = schedule(seed, args.faults, args.window, args.kinds)
    outcome = Outcome(seed, [asdict(f) for f in faults], commit=head())
    base = Path(args.keep) if args.keep else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=f"sluicegate-chaos-{seed}-", dir=base))
    os.chmod(root, 0o755)  # PostgreSQL's server (the postgres user) works under it
    outcome.root = str(root)
    try:
        with stack(root, seed) as st:
            _run(st, seed, faults, outcome, args)
    except Exception as exc:
        outcome.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        (root / "error.txt").write_text(traceback.format_exc())
    if outcome.ok and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return outcome


def _run(
    st: Stack, seed: int, faults: list[Fault], outcome: Outcome, args: argparse.Namespace
) -> None:
    tag = f"c{seed}"
    bootstrap = st.kafka.bootstrap_servers
    main, pa, pb = f"{tag}-main", f"{tag}-p-a", f"{tag}-p-b"
    for topic, partitions in ((main, 3), (pa, 2), (pb, 2)):
        create_topic(bootstrap, topic, partitions)
    st.topics = {"main": [main], "pattern": [pa, pb]}
    specs = {
        "main": chaos_spec("main", bootstrap, main),
        "pattern": chaos_spec("pattern", bootstrap, pattern=f"{tag}-p-[a-z]"),
    }
    numbers = Numbers(bootstrap, [main, pa, pb], args.rate, seed, transactions=True).start()
    try:
        with st.api() as api:
            for body in specs.values():
                api.post(BASE, json=body).raise_for_status()
        if not wait_until(lambda: len(st.committed()) == len(specs), LONG_S):
            raise RuntimeError("the supervisors did not publish before the faults")
        inject = Injector(st, specs)
        began = time.monotonic()
        for index, fault in enumerate(faults):
            time.sleep(max(0.0, began + fault.at - time.monotonic()))
            said = inject(fault)
            outcome.faults[index]["done"] = said
            print(
                f"  seed={seed} +{time.monotonic() - began:.0f}s {fault.kind}: {said}", flush=True
            )
        ended = time.monotonic()
        target = st.log_ends()
        if not wait_until(lambda: caught_up(st, target), args.stuck_s):
            outcome.stuck = True
            return
        outcome.recovery_s = round(time.monotonic() - ended, 1)
    finally:
        numbers.stop()
    if numbers.broken:
        raise RuntimeError(f"a producer broke: {numbers.broken[0]}")
    final = st.log_ends()
    if not wait_until(lambda: caught_up(st, final), args.stuck_s):
        outcome.stuck = True
        return
    check(st, numbers, outcome)


def check(st: Stack, numbers: Numbers, outcome: Outcome) -> None:
    """Each supervisor's Iceberg table, read by pyiceberg through the catalog in the metadata
    DB, against what was produced to its topics; the table's files are the used segments' and
    its latest snapshot of the supervisor holds its committed offsets."""
    from pyiceberg.catalog.sql import SqlCatalog

    from supervisor.lake.tables import CATALOG, SUMMARY_COMMITTED, SUMMARY_SUPERVISOR

    outcome.uncertain = len(numbers.uncertain)
    outcome.aborted_produced = len(numbers.aborted)
    outcome.producer_errors = numbers.errors[:10]
    catalog = SqlCatalog(
        CATALOG,
        uri=st.db_url,
        **{"s3.endpoint": st.s3.endpoint, "s3.region": "us-east-1"},
        **{"s3.access-key-id": st.s3.access_key, "s3.secret-access-key": st.s3.secret_key},
    )
    committed = st.committed()
    for sid, topics in st.topics.items():
        table = catalog.load_table(f"druid.{sid}")
        published: list[int] = table.scan(selected_fields=("n",)).to_arrow().column("n").to_pylist()
        files = {task.file.file_path for task in table.scan().plan_files()}
        used = st.rows(
            select(SegmentRow.path).where(SegmentRow.datasource == sid, SegmentRow.used.is_(True))
        )
        if files != {path for (path,) in used}:
            outcome.error = f"{sid}: the table's files are not the used segments' files"
        mine_last = [
            s.summary
            for s in table.snapshots()
            if s.summary and s.summary.get(SUMMARY_SUPERVISOR) == sid
        ]
        if not mine_last or json.loads(mine_last[-1][SUMMARY_COMMITTED]) != committed.get(sid):
            outcome.error = (
                f"{sid}: the table's latest snapshot does not hold its committed offsets"
            )
        counts = Counter(published)
        expected = {n for n, (topic, _, _) in numbers.where.items() if topic in topics}
        mine = set(counts)
        outcome.records += len(expected)
        outcome.duplicates += sum(c - 1 for c in counts.values() if c > 1)
        outcome.missing += len(expected - mine - numbers.uncertain)
        outcome.aborted_published += len((mine & numbers.aborted) - numbers.uncertain)
        stray = mine - expected - numbers.aborted - numbers.uncertain
        if stray:
            outcome.error = f"{sid}: records no producer wrote to its topics: {sorted(stray)[:10]}"
    outcome.tasks_failed = len(st.rows(select(TaskRow.id).where(TaskRow.status == "FAILED")))


# ---- the whole --------------------------------------------------------------------------------


def summary(outcomes: list[Outcome]) -> str:
    recoveries = [o.recovery_s for o in outcomes if o.recovery_s is not None]
    return (
        f"RATIO runs={len(outcomes)} ok={sum(o.ok for o in outcomes)} "
        f"dupes={sum(o.duplicates for o in outcomes)} missing={sum(o.missing for o in outcomes)} "
        f"stuck={sum(o.stuck for o in outcomes)} "
        f"recovery_p99_s={percentile(recoveries, 99):.1f} "
        f"recovery_max_s={max(recoveries, default=float('nan')):.1f}"
    )


def load(paths: list[str]) -> list[Outcome]:
    """The runs that result files of earlier sweeps hold (a later run of a seed wins)."""
    known = {f.name for f in fields(Outcome)}
    runs: dict[int, Outcome] = {}
    for path in paths:
        for run in json.loads(Path(path).read_text())["runs"]:
            outcome = Outcome(**{k: v for k, v in run.items() if k in known})
            runs[outcome.seed] = outcome
    return [runs[seed] for seed in sorted(runs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seed", type=int, default=FIRST_SEED, help="the first run's seed (see FIRST_SEED)"
    )
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--faults", type=int, default=4, help="faults per run")
    parser.add_argument("--window", type=float, default=120.0, help="seconds the faults begin in")
    parser.add_argument("--rate", type=float, default=60.0, help="records a second in all")
    parser.add_argument("--stuck-s", type=float, default=420.0, help="catch-up bound")
    parser.add_argument(
        "--kinds",
        type=lambda text: text.split(","),
        default=list(WEIGHTS),
        help="the fault kinds drawn from (comma-separated; all by default)",
    )
    parser.add_argument("--keep", help="runs in directories under this one, kept")
    parser.add_argument(
        "--report",
        nargs="+",
        metavar="RESULTS",
        help="run nothing: the table and RATIO of the runs these result files hold (sweeps "
        "run in parts, bench/results/chaos-<first>-<last>.json)",
    )
    args = parser.parse_args(argv)
    if args.report:
        outcomes = load(args.report)
        table(outcomes)
        print(summary(outcomes))
        return 0 if all(o.ok for o in outcomes) else 1
    unknown = [k for k in args.kinds if k not in WEIGHTS]
    if unknown:
        parser.error(f"--kinds: unknown {unknown}; known: {', '.join(WEIGHTS)}")
    stop_on_sigterm()  # a SIGTERM unwinds the run: its stack's services are stopped
    outcomes = []
    name = f"chaos-{args.seed}-{args.seed + args.runs - 1}"
    for seed in range(args.seed, args.seed + args.runs):
        outcome = run_once(seed, args)
        outcomes.append(outcome)
        print(outcome.line(), flush=True)
        write_results(name, {"runs": [asdict(o) | {"ok": o.ok} for o in outcomes]})
    table(outcomes)
    print(summary(outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


def table(outcomes: list[Outcome]) -> None:
    drawn = Counter(f["kind"] for o in outcomes for f in o.faults)
    print(
        f"{'seed':>5} {'commit':>8} {'ok':>3} {'records':>8} {'dupes':>5} {'missing':>7} "
        f"{'recovery':>8}  faults"
    )
    for o in outcomes:
        kinds = ",".join(f["kind"] for f in o.faults)
        recovery = "-" if o.recovery_s is None else f"{o.recovery_s:.1f}"
        print(
            f"{o.seed:>5} {o.commit:>8} {'yes' if o.ok else 'NO':>3} {o.records:>8} "
            f"{o.duplicates:>5} "
            f"{o.missing:>7} {recovery:>8}  {kinds}"
        )
    print("faults drawn: " + ", ".join(f"{k} {drawn.get(k, 0)}" for k in WEIGHTS))
    recoveries = [o.recovery_s for o in outcomes if o.recovery_s is not None]
    if recoveries:
        print(
            "recovery s: "
            + ", ".join(f"p{q} {percentile(recoveries, q):.1f}" for q in (10, 50, 90, 99))
            + f", max {max(recoveries):.1f}"
        )


if __name__ == "__main__":
    sys.exit(main())
