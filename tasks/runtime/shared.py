"""`python -m tasks.host_app`: one long-lived Spark application that runs many indexing tasks,
as Druid's Indexer process runs many tasks in one JVM where its MiddleManager ran a JVM each.

The process serves one port: every task's chat API under /druid/worker/v1/chat/{taskId}/ (the
app a task process serves, tasks/runtime/control.py) and the runner's API under /sluicegate/host/v1/
(the host's own token): assign a task, list the tasks and how they ended, kill one. Spark
starts once, when the process does; a task is a thread with its own Spark job group (its id),
its jobs in the FAIR pool `tasks` (combined reads in `reads`), its own work directory
(persists, task.log, report.json), overlord client, sequences and publish. A task's failure
is its own: its report and exit code say why and the application goes on.

A killed task is fenced at once: its chat API answers 403, no publish call of it starts in
this process (one already sent may commit, as one sent just before a SIGKILL may: the
publish transaction's offset check keeps either exactly once), its Spark jobs are cancelled,
and its thread unwinds behind. The process runs in a session of its own, so it outlives
the overlord that started it; a new overlord adopts it with its tasks
(supervisor/runner/shared.py). One that no overlord calls for the orphan timeout kills its
tasks and exits; a SIGTERM ends it within SIGTERM_BOUND_S (tasks/runtime/orphan.py).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from tasks import runtime_args
from tasks.compaction import CompactionRun
from tasks.host_protocol import (
    HostedTask,
)
from tasks.logs import configure_logging, log_context
from tasks.protocol import AnyTask, CompactTask, TaskState
from tasks.reading.combiner import JobCombiner
from tasks.runtime.control import TaskControl
from tasks.runtime.host_api import Duplicate, Refused, Router, create_host_api
from tasks.runtime.orphan import (
    GRACEFUL_S,
    ORPHANED_EXIT,
    SIGTERM_BOUND_S,
    Contact,
    Heard,
    Watchdog,
    exit_by,
)
from tasks.runtime.run import TaskRun, fields
from tasks.runtime.task_logs import TaskLogs
from tasks.serving import ServerThread
from tasks.spark import scratch

log = logging.getLogger("tasks.host")
TASK_LOG = "task.log"
# A task's batch that is not full waits this long after the one before (tasks/runtime/indexer.py): a
# host of many quiet tasks writes a persist per task a second, not one per poll.
MIN_BATCH_INTERVAL_S = 1.0
READS_POOL, TASKS_POOL = "reads", "tasks"  # FAIR scheduler pools


class Hosted:
    """A task of this application: its run, its thread and, once ended, its exit code."""

    def __init__(self, run: TaskRun | CompactionRun, thread: threading.Thread) -> None:
        self.run: TaskRun | CompactionRun | None = run  # None once ended
        self.thread = thread
        self.exit_code: int | None = None
        self.killed = False

    def view(self) -> HostedTask:
        return HostedTask(
            running=self.exit_code is None and not self.killed,
            exitCode=self.exit_code,
            killed=self.killed,
        )


class TaskHost:
    """The tasks of this application, and the Spark session they share."""

    def __init__(self, args: argparse.Namespace, logs: TaskLogs) -> None:
        self.args = args
        self.logs = logs
        self.tasks: dict[str, Hosted] = {}
        self.starting: set[str] = set()  # ids being assigned (outside the lock)
        self.lock = threading.Lock()
        self.spark: Any = None
        self.spark_error: str | None = None
        self.spark_ready = threading.Event()
        self.combiner: JobCombiner | None = None
        self.scratch: Path | None = None  # Spark's scratch folder, gone with the process

    # ---- Spark -----------------------------------------------------------------------------

    def start_spark(self) -> None:
        from tasks.spark.session import build_session, cluster_conf, driver_conf, limit_arenas

        began = time.monotonic()
        self.scratch = scratch.claim(self.args.token_file.parent)
        try:
            conf = cluster_conf(
                self.args.master, self.args.host, self.args.cores, self.args.executor_memory
            )
            # the reads (the combiner's jobs) in a pool of their own beside the tasks' own jobs
            # (merges, batches on the Spark SQL engine): a long merge does not hold them up
            conf["spark.scheduler.mode"] = "FAIR"
            java = scratch.java_options(self.scratch)
            conf.update(driver_conf(self.args.driver_memory, self.args.fixed_heap, java))
            limit_arenas(self.args.malloc_arenas)
            self.spark = build_session(
                self.args.jar_cache,
                master=self.args.master,
                app_name=f"sluicegate-host-{self.args.port}",
                conf=conf,
            )
            jvm: Any = self.spark.sparkContext._jvm
            # the two pools take FAIR's defaults (no allocation file): not a warning each
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                "org.apache.spark.scheduler.FairSchedulableBuilder",
                jvm.org.apache.logging.log4j.Level.ERROR,
            )
            _start_python_workers(self.spark)
            self.combiner = JobCombiner(self.spark, pool=READS_POOL)
            log.info("Spark started in %.1f s", time.monotonic() - began)
        except Exception as exc:  # every task assigned fails with this reason
            log.exception("Spark did not start")
            self.spark_error = f"Spark did not start: {type(exc).__name__}: {exc}"
        finally:
            self.spark_ready.set()

    @contextmanager
    def scope(self, task: AnyTask) -> Iterator[None]:
        """What a thread working for `task` runs in: its log fields, Spark job group and pool."""
        with log_context(**fields(task)):
            if self.spark is not None:
                context = self.spark.sparkContext
                context.setJobGroup(task.id, f"task {task.id}", interruptOnCancel=True)
                context.setLocalProperty("spark.scheduler.pool", TASKS_POOL)
            try:
                yield
            finally:
                if self.spark is not None:
                    self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", None)

    # ---- tasks -----------------------------------------------------------------------------

    def chat_control(self, task_id: str) -> TaskControl | None:
        with self.lock:
            hosted = self.tasks.get(task_id)
            if hosted is None or hosted.killed or hosted.run is None:
                return None  # gone, as a task process's port is once it ends
            return hosted.run.control

    def assign(self, task: AnyTask, token: str, overlord: str) -> None:
        """Start the task on a thread of its own, publishing through `overlord` (the one that
        assigned it; a leader's calls move it). Duplicate when this host has it already,
        Refused when it cannot be started (its reason)."""
        work = self.args.tasks_dir / task.id
        with self.lock:
            if task.id in self.tasks or task.id in self.starting:
                raise Duplicate(f"task {task.id} is already assigned here")
            self.starting.add(task.id)
        try:
            try:
                work.mkdir(parents=True, exist_ok=True)
                self.logs.open(task.id, work / TASK_LOG)
                run = self._new_run(task, token, overlord, work)
            except Exception as exc:  # its settings (a Kafka client refused them), its disk
                self.logs.close_task(task.id)
                raise Refused(f"task {task.id} cannot start: {type(exc).__name__}: {exc}") from exc
            thread = threading.Thread(
                target=self._run, args=(task.id,), name=f"task-{task.id}", daemon=True
            )
            with self.lock:
                self.tasks[task.id] = Hosted(run, thread)
        finally:
            with self.lock:
                self.starting.discard(task.id)
        thread.start()

    def _new_run(
        self, task: AnyTask, token: str, overlord: str, work: Path
    ) -> TaskRun | CompactionRun:
        if isinstance(task, CompactTask):
            return CompactionRun(task, token, overlord, work, self.args.deep_storage)
        return TaskRun(
            task,
            token,
            overlord,
            work,
            self.args.deep_storage,
            shared_persists=self.args.master.startswith("spark://"),
            scope=lambda: self.scope(task),
        )

    def _run(self, task_id: str) -> None:
        with self.lock:
            hosted = self.tasks[task_id]
            run = hosted.run
        assert run is not None
        code = 1
        try:
            with log_context(**fields(run.task)):
                run.log_start()
                self.spark_ready.wait()
                if self.spark_error is not None:
                    run.kill(self.spark_error)
                if isinstance(run, TaskRun):  # its reads share jobs with the others
                    run.indexer.combiner = self.combiner
                    run.indexer.min_batch_interval_s = MIN_BATCH_INTERVAL_S
                with self.scope(run.task):
                    final = run.execute(self.spark)
                code = 0 if final.status is TaskState.SUCCESS else 1
        except Exception:  # its report says why when it could write one
            log.exception("task %s ended with an error", task_id)
        finally:
            # nothing of it goes on once it has ended (a failed task's publisher may be merging)
            run.kill("the task has ended")
            self._cancel_jobs(task_id)
            with self.lock:
                hosted.exit_code = code
                hosted.run = None  # its Kafka client, app and state go (its report stays)
            self.logs.close_task(task_id)

    def kill(self, task_id: str, reason: str = "killed by the overlord") -> bool:
        """Fence and stop a running task; True if it was running."""
        with self.lock:
            hosted = self.tasks.get(task_id)
            if hosted is None or hosted.killed or hosted.run is None:
                return False
            hosted.killed = True  # its chat API is gone from now on
            run = hosted.run
        run.kill(reason)
        self._cancel_jobs(task_id)
        log.info("task %s killed", task_id)
        return True

    def kill_all(self, reason: str, timeout: float) -> None:
        """Kill every running task (none publishes) and give their threads `timeout` to write
        their reports."""
        with self.lock:
            ids = list(self.tasks)
        killed = [self.tasks[task_id] for task_id in ids if self.kill(task_id, reason)]
        deadline = time.monotonic() + timeout
        for hosted in killed:
            hosted.thread.join(max(0.0, deadline - time.monotonic()))

    def _cancel_jobs(self, task_id: str) -> None:
        """Cancel the task's Spark jobs that still run (its job group)."""
        if self.spark is None:
            return
        context = self.spark.sparkContext
        tracker = context.statusTracker()
        if set(tracker.getJobIdsForGroup(task_id)) & set(tracker.getActiveJobsIds()):
            context.cancelJobGroup(task_id)

    def forget(self, task_id: str) -> bool:
        with self.lock:
            hosted = self.tasks.get(task_id)
            if hosted is None or (hosted.exit_code is None and not hosted.killed):
                return False
            del self.tasks[task_id]
            return True

    def views(self) -> dict[str, HostedTask]:
        with self.lock:
            return {task_id: hosted.view() for task_id, hosted in self.tasks.items()}

    def stop_all(self, timeout: float = GRACEFUL_S) -> None:
        """A graceful stop of every task (SIGTERM): each publishes what it read."""
        with self.lock:
            runs = [h for h in self.tasks.values() if h.run is not None and not h.killed]
            stopping = [h.run for h in runs if h.run is not None]
        for run in stopping:
            run.stop()
        deadline = time.monotonic() + timeout
        for hosted in runs:
            hosted.thread.join(max(0.0, deadline - time.monotonic()))


def _start_python_workers(spark: Any) -> None:
    """One job over every core that imports what the tasks' batches run in Spark's Python
    workers: the first task's first batch then costs what its later ones do."""

    def load(batches: Iterator[Any]) -> Iterator[Any]:
        from tasks.reading import python_worker

        # loads the modules of the batches (the first direct read's confluent_kafka alone took
        # ~0.3 s, pyarrow's pandas shim ~0.5 s) and freezes them out of the worker's collections
        python_worker.settle()
        yield from batches

    context = spark.sparkContext
    cores = max(1, int(context.defaultParallelism))
    # the combiner's RDD jobs and the DataFrame jobs of the Spark SQL engine's batches run in
    # Python workers of their own (a combined job's first batches took 3.7 s with only the
    # DataFrame's loaded)
    context.parallelize(range(cores), cores).mapPartitions(load).collect()
    spark.range(0, cores, 1, cores).mapInArrow(load, "id long").collect()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = runtime_args.parser("python -m tasks.host_app")
    parser.add_argument("--tasks-dir", type=Path, required=True, help="tasks' work directories")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = args.token_file.read_text().strip()
    configure_logging("info", args.log_format, {})
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per publish call otherwise
    logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per task thread's end
    root = logging.getLogger()
    logs = TaskLogs(root.handlers[0].formatter)
    for handler_filter in root.handlers[0].filters:
        logs.addFilter(handler_filter)
    root.addHandler(logs)
    host = TaskHost(args, logs)
    stopping = threading.Event()
    bounds: list[threading.Timer] = []

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        if not bounds:  # the first signal bounds the stop
            bounds.append(exit_by(SIGTERM_BOUND_S))
        stopping.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    contact = Contact()
    control = ServerThread(
        Heard(Router(host, create_host_api(host, token)), contact),
        args.host,
        args.port,
        args.tls_cert,
        args.tls_key,
        "control-api",
        access_log=False,
    )
    control.start()
    log.info("task host application serves %s:%s", args.host, args.port)

    def _orphaned() -> None:
        reason = f"no overlord called its host application for {args.orphan_timeout_s:.0f} s"
        host.kill_all(reason, GRACEFUL_S)
        stopping.set()

    watchdog = Watchdog(contact, args.orphan_timeout_s, _orphaned)
    watchdog.start()
    host.start_spark()
    if host.spark_error is not None:  # its tasks fail with the reason; the next launch starts anew
        time.sleep(2.0)
        host.stop_all(10.0)
        control.stop()
        if host.scratch is not None:
            scratch.release(host.scratch)
        return 1
    while not stopping.wait(1.0):
        pass
    watchdog.stop()
    if not watchdog.fired.is_set():
        log.info("stopping: every task publishes what it read")
        host.stop_all()
    if host.combiner is not None:
        host.combiner.close()
    control.stop()
    if host.spark is not None:
        host.spark.stop()
    if host.scratch is not None:
        scratch.release(host.scratch)
    return ORPHANED_EXIT if watchdog.fired.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
