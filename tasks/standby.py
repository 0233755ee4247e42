"""A standby task process: a Spark driver started and warmed before it has a task.

The runner starts standbys shortly before a task group's `taskDuration` ends (see
supervisor/runner/standby.py), so the group's successors begin reading within a second of the
rollover instead of after a Spark start-up. A standby serves one call on its control port,
`POST /druid/worker/v1/standby/assign` with the task's payload and token; from then on the
same port serves the task's own control API and the process is that task.

Warming runs the task's own pipeline once over the newest few records of its partitions (the
template payload the runner passes), then merges that batch into segments the way a handoff
does, so the Kafka source, the JSON parser, the Parquet writers and the merge's shuffle and
Python worker are loaded and compiled before the first real batch and the first publish.
Nothing warmed is published.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse

from tasks.assignment import read_assignment
from tasks.assignment import refused as token_refused
from tasks.kafka_offsets import OffsetReader
from tasks.partitions import Offsets, PartitionKey, sorted_keys
from tasks.protocol import TOKEN_HEADER, IndexKafkaTask

log = logging.getLogger(__name__)
WARM_RECORDS = 50  # per partition, read and indexed while warming
# A batch's fixed costs (planning, Kafka consumers, the Python workers' round trip) keep falling
# over a process's first batches (0.9 s -> 0.6 s for 160 records over 10 batches, warm):
# a standby runs a few, so its task's first batch costs less.
WARM_BATCHES = 8
# Then, until a task arrives, one such batch every KEEP_WARM_S: a warmed standby still read its
# task's first batches at ~0.4-0.5 s against a long-running task's 0.25 s (the JVM compiles hot
# code over many batches; Spark stops Python workers left idle too long).
KEEP_WARM_S = 2.0
ASSIGN_PATH = "/druid/worker/v1/standby/assign"
STATUS_PATH = "/druid/worker/v1/standby/status"


class Switch:
    """An ASGI app that forwards to whichever app it holds: the standby's, then the task's."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


@dataclass
class Assignment:
    """What the standby waits for: a task and its token, handed over by the runner."""

    ready: threading.Event = field(default_factory=threading.Event)
    warm: threading.Event = field(default_factory=threading.Event)
    task: IndexKafkaTask | None = None
    token: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, timeout: float) -> IndexKafkaTask | None:
        self.ready.wait(timeout)
        with self.lock:
            return self.task


def create_standby_app(token: str, assignment: Assignment, on_assign: Any) -> FastAPI:
    """The standby's API: its status, and the one call that makes it a task.
    `on_assign(task, token)` runs before the answer, so once the runner has its 200 the port
    already serves that task's control API."""
    app = FastAPI(title="Sluicegate standby task", openapi_url=None, docs_url=None)

    def refused(given: str | None) -> JSONResponse | None:
        return token_refused(given, token, "missing or wrong token")

    @app.get(STATUS_PATH, response_model=None)
    def status(
        given: str | None = Header(default=None, alias=TOKEN_HEADER),
    ) -> JSONResponse | dict[str, str]:
        denied = refused(given)
        if denied is not None:
            return denied
        return {"status": "WARM" if assignment.warm.is_set() else "WARMING"}

    @app.post(ASSIGN_PATH, response_model=None)
    async def assign(
        request: Request, given: str | None = Header(default=None, alias=TOKEN_HEADER)
    ) -> JSONResponse | dict[str, str]:
        denied = refused(given)
        if denied is not None:
            return denied
        read = await read_assignment(request)
        if isinstance(read, JSONResponse):
            return read
        task, body = read
        with assignment.lock:
            if assignment.task is not None:
                return JSONResponse(
                    status_code=409, content={"error": f"already task {assignment.task.id}"}
                )
            assignment.task, assignment.token = task, body["token"]
        on_assign(task, body["token"])
        assignment.ready.set()
        return {"status": "assigned", "task": task.id}

    return app


WARM_UP_GROUP = "sluicegate-warm-up"


def cancel_warm_up(spark: Any) -> None:
    """Called when the task arrives: stop warming, so the task's first batch need not wait."""
    spark.sparkContext.cancelJobGroup(WARM_UP_GROUP)


def _newest(reader: OffsetReader, topic: str, keys: list[PartitionKey]) -> tuple[Offsets, Offsets]:
    """The range of the newest WARM_RECORDS records of each partition: (start, end)."""
    latest = reader.latest(topic, keys)
    earliest = reader.earliest(topic, keys)
    return {k: max(earliest[k], latest[k] - WARM_RECORDS) for k in keys}, latest


@contextmanager
def _warming(spark: Any, description: str, scratch: Path) -> Iterator[None]:
    """This thread's Spark jobs in the warm-up group (cancel_warm_up stops them), and `scratch`
    removed afterwards."""
    spark.sparkContext.setJobGroup(WARM_UP_GROUP, description, True)
    try:
        yield
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        shutil.rmtree(scratch, ignore_errors=True)


def warm_up(spark: Any, template: IndexKafkaTask, scratch: Path, done: threading.Event) -> None:
    """Run the task's two Spark paths once over the newest few records of the template's
    partitions, in a scratch directory, and throw the result away: a batch (read, parse,
    roll up, persist; by the engine the task's will run on, tasks/engines/),
    then a handoff's merge of that persist into segments (nothing is published). Stop early
    once `done` is set (a task arrived). Best effort: a failure only means a colder start."""
    from tasks.engines.choice import Engines
    from tasks.pipeline import RowPlan
    from tasks.reader import KafkaBatch
    from tasks.segments import SegmentContext

    io = template.ioConfig
    stream = io.topic
    start, latest = _newest(
        OffsetReader(io.consumerProperties), stream, sorted_keys(io.start_offsets())
    )
    plan = RowPlan(template.dataSchema, io.inputFormat)
    engines = Engines(spark, plan)  # the task's seam: the same engines run its batches
    with _warming(spark, "warming a standby", scratch):
        began = time.monotonic()
        for round_ in range(WARM_BATCHES):
            persist = str(scratch / f"persist-{round_}")
            persisted = engines.persist(KafkaBatch(spark, io, start, latest), persist, 0, [])
            if done.is_set():
                return
        batch_s = time.monotonic() - began
        context = SegmentContext(
            task_id="warm-up",
            datasource=template.datasource,
            topic=stream,
            start=start,
            end=latest,
            spec_version="",
            deep_storage=str(scratch / "segments"),
        )
        dims = persisted.result.dimensions or plan.declared_dimensions()
        engines.merge(
            [persist],
            {persisted.engine},
            [name for name, _ in dims],
            context,
            template.tuningConfig.maxRowsPerSegment,
        )
        log.info(
            f"standby: warm-up {WARM_BATCHES} batches %.1f s, handoff merge %.1f s",
            batch_s,
            time.monotonic() - began - batch_s,
        )


def keep_warm(spark: Any, template: IndexKafkaTask, scratch: Path, done: threading.Event) -> int:
    """Until `done` is set: every KEEP_WARM_S, the newest WARM_RECORDS of each partition through
    the task's batch path into `scratch` (thrown away). The batches run, how many."""
    from tasks.engines.choice import Engines
    from tasks.pipeline import RowPlan
    from tasks.reader import KafkaBatch

    io = template.ioConfig
    keys = sorted_keys(io.start_offsets())
    reader = OffsetReader(io.consumerProperties)
    engines = Engines(spark, RowPlan(template.dataSchema, io.inputFormat))
    batches = 0
    with _warming(spark, "keeping a standby warm", scratch):
        while not done.wait(KEEP_WARM_S):
            start, latest = _newest(reader, io.topic, keys)
            persist = scratch / f"keep-{batches}"
            engines.persist(KafkaBatch(spark, io, start, latest), str(persist), 0, [])
            shutil.rmtree(persist, ignore_errors=True)
            batches += 1
    return batches


__all__ = [
    "ASSIGN_PATH",
    "STATUS_PATH",
    "Assignment",
    "Switch",
    "cancel_warm_up",
    "create_standby_app",
    "keep_warm",
    "warm_up",
]
