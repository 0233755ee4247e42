"""Observe: read everything a pass needs (spec, tasks, committed offsets, the stream)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clients.task_api import TaskApiClient, TaskApiError, reachable
from supervisor.controller.workers import waits
from supervisor.db.models import TaskRow
from supervisor.db.offsets import OffsetsRepository
from supervisor.db.repositories import (
    AutoscalerRepository,
    SpecRepository,
    SpecVersion,
)
from supervisor.db.tasks import TaskRepository
from supervisor.lru import Lru
from supervisor.model.fence import Leader
from supervisor.model.views import Snapshot, spec_view, task_view
from supervisor.schemas.kafka_access import KafkaAccess
from supervisor.schemas.spec import SupervisorSpec, stored_spec
from tasks.partitions import Offsets, PartitionKey, multi_key, offsets_from_json, sorted_keys
from tasks.protocol import TaskMetrics, TaskStatusCode

CLUSTERS_KEPT = 64  # Kafka clusters whose admin client a StreamReader keeps


class StreamError(RuntimeError):
    """Kafka could not be reached or the topic could not be described."""


class StreamReader:
    """Partitions and offsets of the supervisor's topic, or of every topic its topicPattern
    matches (a seam for tests of the loop).

    One Kafka admin client per cluster (its connection properties), kept from pass to pass: a
    new client per pass took 70 ms at the median and 1-3 s in one pass of 20 (its first
    requests wait on its connections and metadata), on an idle machine against a local broker.
    A client whose cluster fails a pass is dropped, so a dead address keeps nothing connecting."""

    def __init__(self, timeout_s: float = 10.0, access: KafkaAccess | None = None) -> None:
        self.timeout_s = timeout_s
        self.access = access or KafkaAccess()
        self.readers: Lru[tuple[tuple[str, str], ...], Any] = Lru(CLUSTERS_KEPT)

    def describe(
        self, consumer_properties: Mapping[str, object], stream: str, pattern: bool = False
    ) -> tuple[tuple[PartitionKey, ...], Offsets, Offsets]:
        servers = str(consumer_properties["bootstrap.servers"])
        cluster: tuple[tuple[str, str], ...] = ()
        try:
            cluster, reader = self._reader(consumer_properties)
            if pattern:
                partitions = _matching(reader.admin.list_topics(timeout=self.timeout_s), stream)
            else:
                metadata = reader.admin.list_topics(stream, timeout=self.timeout_s)
                described = metadata.topics.get(stream)
                if described is None or described.error is not None:
                    raise StreamError(
                        f"topic {stream} is not available: {described and described.error}"
                    )
                partitions = tuple(sorted(described.partitions))
            if not partitions:
                return (), {}, {}
            return (
                partitions,
                reader.earliest(stream, list(partitions)),
                reader.latest(stream, list(partitions)),
            )
        except StreamError:
            raise
        except Exception as exc:
            self.readers.discard(cluster)
            raise StreamError(f"cannot reach Kafka at {servers}: {exc}") from exc

    def _reader(self, consumer_properties: Mapping[str, object]) -> tuple[Any, Any]:
        """The cluster's key and its admin client (made on first use)."""
        from tasks.kafka_offsets import OffsetReader, client_config, cluster_key

        config = self.access.service_config(consumer_properties)
        cluster = cluster_key(client_config(config))
        reader = self.readers.get(cluster)
        if reader is None:
            reader = OffsetReader(config, timeout=self.timeout_s)
            self.readers.put(cluster, reader)
        return cluster, reader

    def mirror(
        self,
        consumer_properties: Mapping[str, object],
        group: str,
        stream: str,
        committed: Offsets,
    ) -> None:
        """The committed offsets as the consumer group's, so Kafka's own lag tools show the
        supervisor's lag; no committed offsets (after a reset): the group is deleted. Raises
        what Kafka answers."""
        from tasks.kafka_offsets import unreachable

        cluster, reader = self._reader(consumer_properties)
        try:
            if committed:
                reader.commit_group(group, stream, committed)
            else:
                reader.delete_group(group)
        except Exception as exc:
            if unreachable(exc):  # a cluster away: a new client next time
                self.readers.discard(cluster)
            raise


def _matching(metadata: Any, pattern: str) -> tuple[PartitionKey, ...]:
    """ "topic:partition" keys of every topic whose whole name matches the pattern (as Java's
    Pattern.matches), leaving out Kafka's internal topics (named "__...")."""
    regex = re.compile(pattern)
    keys = [
        multi_key(name, number)
        for name, topic in metadata.topics.items()
        if regex.fullmatch(name) and not name.startswith("__") and topic.error is None
        for number in topic.partitions
    ]
    return tuple(sorted_keys(keys))


@dataclass
class TaskProbe:
    """What running tasks say of themselves: where they read now, their counters (rows,
    persists, handoffs), and since when they read (asked once: a task's start never changes)."""

    current: dict[str, Offsets] = field(default_factory=dict)
    started: dict[str, datetime] = field(default_factory=dict)
    metrics: dict[str, TaskMetrics] = field(default_factory=dict)
    leader: Leader | None = None  # sent along: a new leader's first probe fences the old

    def probe(self, rows: list[TaskRow]) -> None:
        current: dict[str, Offsets] = {}
        metrics: dict[str, TaskMetrics] = {}
        if any(reachable(row) for row in rows):
            waits()  # on the tasks: a host of a hundred answers in ~0.3 s, not 3 ms
        for row in rows:
            if not reachable(row):
                continue
            try:
                client = TaskApiClient.for_task(row, timeout=2.0, leader=self.leader)
                answer = client.metrics()
                offsets = answer.currentOffsets
                if offsets is None:  # a task of an earlier version, adopted: ask
                    offsets = client.current_offsets()
                metrics[row.id] = answer
                if row.id not in self.started:
                    since = client.start_time()
                    if since is not None:
                        self.started[row.id] = since
            except TaskApiError:
                continue
            current[row.id] = offsets_from_json(offsets)
        self.current, self.metrics = current, metrics
        running = {row.id for row in rows if row.status == TaskStatusCode.RUNNING}
        self.started = {k: v for k, v in self.started.items() if k in running}


def observe(
    session: Session,
    supervisor_id: str,
    now: datetime,
    stream: StreamReader,
    handoff_requested: frozenset[int] = frozenset(),
    probe: TaskProbe | None = None,
    laps: dict[str, float] | None = None,
) -> tuple[Snapshot, SupervisorSpec, SpecVersion] | None:
    """The snapshot of one supervisor, or None when it has no spec at all or was terminated
    and has no task left running. `laps` gets the
    seconds spent reading the DB, asking Kafka and asking the tasks."""
    laps = {} if laps is None else laps
    began = time.monotonic()
    row = SpecRepository(session).latest(supervisor_id)
    if row is None:
        return None
    tombstone = row.tombstone
    if tombstone:  # terminated: wind down with the last real spec
        history = [r for r in SpecRepository(session).history(supervisor_id) if not r.tombstone]
        if not history:
            return None
        row = SpecVersion.of(history[0])
    spec = stored_spec(row.id, row.payload)
    scaled = None
    config = spec.spec.ioConfig.autoScalerConfig
    if config is not None and config.enableTaskAutoScaler:
        found = AutoscalerRepository(session).get(supervisor_id)
        scaled = found.task_count if found is not None else None
    view = spec_view(row, spec, scaled)
    committed = offsets_from_json(OffsetsRepository(session).offsets(supervisor_id) or {})
    since = now - timedelta(seconds=view.completion_timeout_s + 60)
    rows = TaskRepository(session).of_supervisor(supervisor_id, since)
    # The DB is read: end the read transaction, so that no DB connection stays checked out
    # while Kafka and the tasks are asked over the network (the rows stay loaded).
    session.commit()
    laps["db"] = (asked := time.monotonic()) - began
    if tombstone:
        # Terminated: its live tasks are wound down, which asks nothing of Kafka, and with
        # none left the supervisor is gone at once (it did not wait on an unreachable broker).
        live = [t for t in rows if t.status == TaskStatusCode.RUNNING]
        if not live:  # gone: its autoscaler's count too (a new one of the id starts afresh)
            AutoscalerRepository(session).forget(supervisor_id)
            return None
        partitions = tuple(sorted_keys({p for t in live for p in task_view(t).start}))
        earliest: Offsets = {}
        latest: Offsets = {}
    else:
        io = spec.spec.ioConfig
        pattern = io.topicPattern is not None
        partitions, earliest, latest = stream.describe(
            io.consumerProperties, io.topicPattern or io.topic or "", pattern
        )
    laps["kafka"] = (probed := time.monotonic()) - asked
    probe = probe or TaskProbe()
    probe.probe(rows)
    laps["tasks"] = time.monotonic() - probed
    tasks = tuple(
        replace(
            task_view(t), reading_since=probe.started.get(t.id), current=probe.current.get(t.id)
        )
        for t in rows
    )
    snapshot = Snapshot(
        supervisor_id=supervisor_id,
        spec=view,
        now=now,
        suspended=row.suspended or tombstone,
        partitions=partitions,
        earliest=earliest,
        latest=latest,
        committed=committed,
        tasks=tasks,
        handoff_requested=handoff_requested,
        terminated=tombstone,
    )
    return snapshot, spec, row
