"""`python -m tasks`: one Kafka indexing task as a Spark driver process.

It serves its control API at once (status STARTING), starts Spark, reads, publishes through the
overlord, writes report.json into its work directory and exits 0 on SUCCESS, 1 on FAILED.

With `--standby` it starts Spark and warms it before it has a task (tasks/standby.py), then
waits for the runner to hand it one; `--payload` is then only a template to warm with.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from tasks.control import ControlServer
from tasks.logs import configure_logging
from tasks.priority import step_back
from tasks.protocol import IndexKafkaTask, TaskState
from tasks.run import TaskRun, fields
from tasks.standby import (
    Assignment,
    Switch,
    cancel_warm_up,
    create_standby_app,
    keep_warm,
    warm_up,
)

log = logging.getLogger("tasks")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tasks")
    parser.add_argument("--payload", type=Path, required=True)
    parser.add_argument("--overlord", required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--deep-storage", required=True, help="a directory or s3://bucket/prefix")
    parser.add_argument("--jar-cache", type=Path, required=True)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--cores", type=int, default=1, help="on a spark:// master: the application's cores"
    )
    parser.add_argument(
        "--executor-memory", default="1g", help="on a spark:// master: memory per executor"
    )
    parser.add_argument("--tls-cert", type=Path, help="serve the chat API over TLS (PEM)")
    parser.add_argument("--tls-key", type=Path)
    parser.add_argument(
        "--publish-niceness",
        type=int,
        default=0,
        help="raise the nice value by this much once given final end offsets (0: never)",
    )
    parser.add_argument(
        "--standby", action="store_true", help="warm up, then wait to be assigned a task"
    )
    parser.add_argument(
        "--standby-idle",
        type=float,
        default=900.0,
        help="a standby exits after this many seconds without a task",
    )
    return parser.parse_args(argv)


def _start_spark(args: argparse.Namespace, name: str) -> Any:
    from tasks.spark import build_session, cluster_conf

    conf = cluster_conf(args.master, args.host, args.cores, args.executor_memory)
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


def _run(args: argparse.Namespace, run: TaskRun, control: ControlServer, spark: Any) -> int:
    """The process's one task, to its end; the exit code."""
    configure_logging("info", args.log_format, fields(run.task))

    def _graceful(_signum: int, _frame: FrameType | None) -> None:
        run.indexer.stop()

    signal.signal(signal.SIGTERM, _graceful)
    run.log_start()
    try:
        if spark is None:
            spark = _start_spark(args, run.task.id)
        final = run.execute(spark)
    finally:
        control.stop()
        if spark is not None:
            spark.stop()
    return 0 if final.status is TaskState.SUCCESS else 1


def _standby(args: argparse.Namespace, token: str) -> int:
    configure_logging("info", args.log_format, {"task": args.work_dir.name})
    template = IndexKafkaTask.model_validate(json.loads(args.payload.read_text()))
    assignment = Assignment()
    runs: list[TaskRun] = []
    switch = Switch(None)
    sessions: list[Any] = []  # the SparkSession, once started
    quiet = threading.Event()  # set when nothing more may be warmed: a task came, or none will

    def on_assign(task: IndexKafkaTask, task_token: str) -> None:
        assigned_at, warm = time.time(), assignment.warm.is_set()
        run = _task_run(args, task, task_token)
        state = run.indexer.state
        state.standby, state.assigned_at, state.warm_at_assign = True, assigned_at, warm
        runs.append(run)
        switch.app = run.app  # the port answers as the task from now on
        quiet.set()
        if sessions:
            cancel_warm_up(sessions[0])

    switch.app = create_standby_app(token, assignment, on_assign)
    control = ControlServer(switch, args.host, args.port, args.tls_cert, args.tls_key)
    control.start()
    log.info("standby: starting Spark")
    began = time.monotonic()
    spark = _start_spark(args, args.work_dir.name)
    log.info("standby: Spark started in %.1f s", time.monotonic() - began)
    sessions.append(spark)
    # Warm in a thread of its own: a task that arrives mid-warm-up starts at once, while the
    # cancelled warm-up job unwinds beside it (that took 1-2 s on a busy machine).
    warming = threading.Thread(
        target=_warm, args=(args, spark, template, assignment, quiet), name="warm-up"
    )
    warming.daemon = True
    warming.start()
    while not assignment.warm.is_set() and not assignment.ready.wait(0.1):
        pass
    if assignment.wait(args.standby_idle) is None:  # idle from the end of the warm-up
        log.info("standby: no task after %.0f s, exiting", args.standby_idle)
        quiet.set()
        warming.join(30)
        control.stop()
        spark.stop()
        return 0
    return _run(args, runs[0], control, spark)


def _warm(
    args: argparse.Namespace,
    spark: Any,
    template: IndexKafkaTask,
    assignment: Assignment,
    quiet: threading.Event,
) -> None:
    try:
        warm_up(spark, template, args.work_dir / "warm-up", assignment.ready)
        # A task's objects built once and dropped: their first build imports httpx's transport
        # and builds a FastAPI app for the first time (~0.15 s), after the group has paused.
        if not assignment.ready.is_set():
            _task_run(args, template, "").close()
        log.info("standby: warm")
    except Exception as exc:  # a cold first batch is slower, not wrong
        if assignment.ready.is_set():
            log.info("standby: warm-up cut short, the task arrived")
        else:
            log.warning("standby: warm-up failed (%s); the first batch starts cold", exc)
        return
    finally:
        assignment.warm.set()
    try:
        batches = keep_warm(spark, template, args.work_dir / "keep-warm", quiet)
        log.info("standby: %d batches kept it warm", batches)
    except Exception as exc:
        if not quiet.is_set():
            log.warning("standby: keeping warm stopped (%s)", exc)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    token = args.token_file.read_text().strip()
    if args.standby:
        return _standby(args, token)
    task = IndexKafkaTask.model_validate(json.loads(args.payload.read_text()))
    configure_logging("info", args.log_format, fields(task))
    run = _task_run(args, task, token)
    control = ControlServer(Switch(run.app), args.host, args.port, args.tls_cert, args.tls_key)
    control.start()
    return _run(args, run, control, None)


if __name__ == "__main__":
    sys.exit(main())
