"""`python -m tasks`: one Kafka indexing task as a Spark driver process.

It serves its control API at once (status STARTING), starts Spark, reads, publishes through the
overlord, writes report.json into its work directory and exits 0 on SUCCESS, 1 on FAILED.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from supervisor.logs import configure_logging
from tasks.control import ControlServer, create_control_app
from tasks.indexer import IndexerState, KafkaIndexer
from tasks.overlord import OverlordClient
from tasks.partitions import Offsets, offsets_json
from tasks.protocol import IndexKafkaTask, TaskState

log = logging.getLogger("tasks")
REPORT = "report.json"


def report(state: IndexerState) -> dict[str, Any]:
    return {
        "status": str(state.status),
        "errorMsg": state.error,
        "rowStats": state.stats.as_dict(),
        "counters": state.task_counters(),
        "unparseableEvents": state.samples,
        "segments": state.segments,
        "currentOffsets": offsets_json(state.current),
        "endOffsets": offsets_json(state.end),
        "skippedOffsets": state.skipped,
        "readingSince": None
        if state.started_at is None
        else datetime.fromtimestamp(state.started_at, UTC).isoformat().replace("+00:00", "Z"),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tasks")
    parser.add_argument("--payload", type=Path, required=True)
    parser.add_argument("--overlord", required=True)
    parser.add_argument("--token-file", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--deep-storage", type=Path, required=True)
    parser.add_argument("--jar-cache", type=Path, required=True)
    parser.add_argument("--master", default="local[*]")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    task = IndexKafkaTask.model_validate(json.loads(args.payload.read_text()))
    fields = {"supervisor": task.supervisorId, "task": task.id, "group": task.ioConfig.taskGroupId}
    configure_logging("info", args.log_format, fields)
    token = args.token_file.read_text().strip()
    overlord = OverlordClient(args.overlord, task.id, token)

    def checkpoint(start: Offsets) -> None:
        overlord.request_checkpoint(
            task.supervisor_key, task.ioConfig.taskGroupId, task.ioConfig.topic, start
        )

    indexer = KafkaIndexer(
        task, None, args.work_dir, args.deep_storage, overlord.publish, checkpoint
    )
    control = ControlServer(create_control_app(indexer, token), args.host, args.port)
    control.start()

    def _graceful(_signum: int, _frame: FrameType | None) -> None:
        indexer.stop()

    signal.signal(signal.SIGTERM, _graceful)
    indexer.state.status = TaskState.STARTING
    log.info(
        "task %s: %s from %s",
        task.id,
        task.ioConfig.topic,
        offsets_json(task.ioConfig.start_offsets()),
    )
    spark: Any = None
    try:
        from tasks.spark import build_session

        spark = build_session(args.jar_cache, master=args.master, app_name=f"sluicegate-{task.id}")
        indexer.spark = spark
        indexer.run()
    finally:
        final = indexer.snapshot()
        (args.work_dir / REPORT).write_text(json.dumps(report(final), indent=2))
        control.stop()
        overlord.close()
        if spark is not None:
            spark.stop()
    log.info("task %s finished: %s %s", task.id, final.status, final.error or "")
    return 0 if final.status is TaskState.SUCCESS else 1


if __name__ == "__main__":
    sys.exit(main())
