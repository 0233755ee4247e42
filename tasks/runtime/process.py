"""`python -m tasks`: one Kafka indexing task as a Spark driver process.

It serves its control API at once (status STARTING), starts Spark, reads, publishes through the
overlord, writes report.json into its work directory and exits 0 on SUCCESS, 1 on FAILED, 3
when no overlord called it for the orphan timeout (tasks/runtime/orphan.py).
(The `process` task runtime; by default tasks run as threads of their host's application,
tasks/runtime/shared.py.)
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from tasks import runtime_args
from tasks.compaction import CompactionRun
from tasks.logs import configure_logging
from tasks.protocol import CompactTask, IndexKafkaTask, TaskState, parse_task
from tasks.runtime.control import create_control_app
from tasks.runtime.orphan import ORPHANED_EXIT, SIGTERM_BOUND_S, Contact, Heard, Watchdog, exit_by
from tasks.runtime.priority import step_back
from tasks.runtime.run import TaskRun, fields
from tasks.serving import ServerThread
from tasks.spark import scratch

log = logging.getLogger("tasks")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = runtime_args.parser("python -m tasks")
    parser.add_argument("--payload", type=Path, required=True)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument(
        "--publish-niceness",
        type=int,
        default=0,
        help="raise the nice value by this much once given final end offsets (0: never)",
    )
    return parser.parse_args(argv)


def _start_spark(args: argparse.Namespace, name: str, folder: Path) -> Any:
    from tasks.spark.session import build_session, cluster_conf, driver_conf, limit_arenas

    conf = cluster_conf(args.master, args.host, args.cores, args.executor_memory)
    conf.update(driver_conf(args.driver_memory, args.fixed_heap, scratch.java_options(folder)))
    limit_arenas(args.malloc_arenas)
    return build_session(
        args.jar_cache, master=args.master, app_name=f"sluicegate-{name}", conf=conf
    )


def _task_run(args: argparse.Namespace, task: IndexKafkaTask, token: str) -> TaskRun:
    def step_back_to_publish() -> None:
        # its successors (if any) read from now on: the rest of this task can wait its turn
        if args.publish_niceness > 0:
            changed = step_back(args.publish_niceness)
            log.info("last stretch: %s threads step back on the CPU", changed)

    return TaskRun(
        task,
        token,
        args.overlord,
        args.work_dir,
        args.deep_storage,
        shared_persists=args.master.startswith("spark://"),
        on_last_stretch=step_back_to_publish,
    )


def _run(
    args: argparse.Namespace,
    run: TaskRun | CompactionRun,
    control: ServerThread,
    contact: Contact,
) -> int:
    """The process's one task, to its end; the exit code."""
    configure_logging("info", args.log_format, fields(run.task))
    bounds: list[threading.Timer] = []

    def _graceful(_signum: int, _frame: FrameType | None) -> None:
        if not bounds:  # the first signal bounds the stop
            bounds.append(exit_by(SIGTERM_BOUND_S))
        run.stop()

    def _orphaned() -> None:
        run.kill(f"no overlord called the task for {args.orphan_timeout_s:.0f} s")

    signal.signal(signal.SIGTERM, _graceful)
    watchdog = Watchdog(contact, args.orphan_timeout_s, _orphaned)
    watchdog.start()
    run.log_start()
    spark = None
    folder = scratch.claim(args.work_dir)  # Spark's scratch, gone with the process
    try:
        spark = _start_spark(args, run.task.id, folder)
        final = run.execute(spark)
    finally:
        watchdog.stop()
        control.stop()
        if spark is not None:
            spark.stop()
        scratch.release(folder)
    if watchdog.fired.is_set():
        return ORPHANED_EXIT
    return 0 if final.status is TaskState.SUCCESS else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = args.token_file.read_text().strip()
    task = parse_task(json.loads(args.payload.read_text()))
    configure_logging("info", args.log_format, fields(task))
    run: TaskRun | CompactionRun
    if isinstance(task, CompactTask):
        run = CompactionRun(task, token, args.overlord, args.work_dir, args.deep_storage)
    else:
        run = _task_run(args, task, token)
    app = create_control_app(lambda task_id: run.control if task_id == task.id else None)
    contact = Contact()
    control = ServerThread(
        Heard(app, contact),
        args.host,
        args.port,
        args.tls_cert,
        args.tls_key,
        "control-api",
        access_log=False,
    )
    control.start()
    return _run(args, run, control, contact)


if __name__ == "__main__":
    sys.exit(main())
