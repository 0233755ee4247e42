"""`GET /metrics`: Druid's ingestion metrics, written by the Prometheus client library in
Prometheus' text format, or OpenMetrics when the scraper asks for it.

Druid's names map to Prometheus names the way its prometheus-emitter does it (slashes become
underscores, counters end in `_total`, times are seconds), under a `sluicegate_` prefix, with
`supervisor`, `datasource` and `stream` labels. Counters of events, persists, handoffs and
pauses add up every task of the supervisor (each replica counts what it read), the finished
ones from their reports in the metadata DB.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from prometheus_client.exposition import (
    CONTENT_TYPE_PLAIN_0_0_4,
    choose_encoder,
    generate_latest,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session

from supervisor.db.offsets import OffsetsRepository
from supervisor.db.repositories import SpecRepository
from supervisor.db.tasks import TaskRepository
from supervisor.model.status import SupervisorStatus
from supervisor.schemas.kafka_access import KafkaAccess
from supervisor.schemas.spec import stored_spec
from supervisor.services.status import partition_lag
from tasks.kafka_offsets import OffsetReader
from tasks.partitions import Offsets, PartitionKey, offsets_from_json, sorted_keys
from tasks.spec.io_config import KafkaIOConfig

PUBLISH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
ROW_COUNTERS = {  # task rowStats field -> Druid metric
    "processed": "ingest/events/processed",
    "processedWithError": "ingest/events/processedWithError",
    "unparseable": "ingest/events/unparseable",
    "thrownAway": "ingest/events/thrownAway",
}
TASK_COUNTERS = {  # task counter -> Druid metric
    "persists": "ingest/persists/count",
    "persistSeconds": "ingest/persists/time",
    "handoffs": "ingest/handoff/count",
    "handoffSeconds": "ingest/handoff/time",
    "pauseSeconds": "ingest/pause/time",
}


def prometheus_name(druid_metric: str, counter: bool = False) -> str:
    """ingest/kafka/maxLag -> sluicegate_ingest_kafka_max_lag; a counter ends in _total
    (ingest/persists/count -> sluicegate_ingest_persists_total); a Druid time, in milliseconds
    there, is in seconds here. A gauge's count is named for what it counts (task/count ->
    sluicegate_tasks): Prometheus keeps the _count suffix for histograms and summaries, and its
    linter (`promtool check metrics`) refuses it on anything else."""
    words = []
    parts = druid_metric.split("/")
    if parts[-1] == "count" and len(parts) > 1:  # ingest/persists/count -> ..._persists_total
        parts = parts[:-1]
        if not counter:
            parts[-1] += "s"
    for part in parts:
        snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in part)
        words.append("seconds" if snake == "time" else snake)
    return "sluicegate_" + "_".join(words) + ("_total" if counter else "")


@dataclass
class Family:
    name: str  # a counter's ends in _total
    kind: str  # gauge, counter, histogram
    help: str
    samples: list[tuple[str, dict[str, Any], float]] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: object) -> None:
        self.samples.append((suffix, labels, value))

    def metric(self) -> Metric:
        """The family as the client library's metric (a counter's is named without _total;
        the expositions add it to its samples)."""
        base = self.name.removesuffix("_total") if self.kind == "counter" else self.name
        metric = Metric(base, self.help, self.kind)
        for suffix, labels, value in self.samples:
            texts = {k: _label(v) for k, v in labels.items()}
            metric.add_sample(self.name + suffix, texts, float(value))
        return metric


def _label(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)  # a bucket's bound: 1.0


class _Scrape(Collector):
    """One scrape's families, for the library's encoders."""

    def __init__(self, families: list[Family]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return [family.metric() for family in self.families]


def exposition(families: list[Family], accept: str | None) -> tuple[bytes, str]:
    """The families in the format the Accept header asks for (the client library negotiates:
    OpenMetrics when asked for, else Prometheus' text format 0.0.4), and its content type."""
    try:
        encode, content_type = choose_encoder(accept or "")
    except (TypeError, ValueError):  # a version it cannot read: the text format, as asked of none
        encode, content_type = generate_latest, CONTENT_TYPE_PLAIN_0_0_4
    return encode(_Scrape(families)), content_type


class PublishLatency:
    """The publish transaction's latency, per datasource and outcome (a histogram)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.series: dict[tuple[str, str], list[float]] = {}  # bucket counts, then +Inf, sum

    def observe(self, datasource: str, outcome: str, seconds: float) -> None:
        with self.lock:
            counts = self.series.setdefault(
                (datasource, outcome), [0.0] * (len(PUBLISH_BUCKETS) + 2)
            )
            for index in range(bisect_left(PUBLISH_BUCKETS, seconds), len(PUBLISH_BUCKETS) + 1):
                counts[index] += 1
            counts[-1] += seconds

    def family(self, readable: Callable[[str], bool] = lambda _: True) -> Family:
        family = Family(
            "sluicegate_publish_seconds",
            "histogram",
            "Time of the publish transaction (segments and offsets in one commit).",
        )
        with self.lock:
            series = {key: list(counts) for key, counts in self.series.items()}
        for (datasource, outcome), counts in sorted(series.items()):
            if not readable(datasource):
                continue
            labels = {"datasource": datasource, "outcome": outcome}
            for bound, count in zip(PUBLISH_BUCKETS, counts, strict=False):
                family.add(count, "_bucket", **labels, le=bound)
            family.add(counts[len(PUBLISH_BUCKETS)], "_bucket", **labels, le="+Inf")
            family.add(counts[len(PUBLISH_BUCKETS)], "_count", **labels)
            family.add(counts[-1], "_sum", **labels)
        return family


@dataclass
class _Finished:
    """Counters of a supervisor's ended tasks, read from the DB once each."""

    totals: dict[str, float] = field(default_factory=dict)
    watermark: datetime | None = None
    counted: set[str] = field(default_factory=set)  # ids counted that ended at the watermark


class FinishedTotals:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_supervisor: dict[str, _Finished] = {}

    def totals(self, session: Session, supervisor_id: str) -> dict[str, float]:
        with self.lock:
            done = self.by_supervisor.setdefault(supervisor_id, _Finished())
            for row in TaskRepository(session).finished_since(supervisor_id, done.watermark):
                if row.id in done.counted:
                    continue
                _add(done.totals, (row.report or {}).get("rowStats", {}))
                _add(done.totals, (row.report or {}).get("counters", {}))
                if row.updated_at != done.watermark:
                    done.watermark, done.counted = row.updated_at, set()
                done.counted.add(row.id)
            return dict(done.totals)


def _add(totals: dict[str, float], values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        if isinstance(value, int | float):
            totals[name] = totals.get(name, 0) + value


class Metrics:
    """What the service keeps for /metrics between scrapes."""

    def __init__(self, access: KafkaAccess | None = None) -> None:
        self.access = access or KafkaAccess()
        self.publish = PublishLatency()
        self.finished = FinishedTotals()

    def scrape(
        self,
        session: Session,
        status: Callable[[str], SupervisorStatus | None],
        readable: Callable[[str], bool] = lambda _: True,
    ) -> list[Family]:
        """Every family of a scrape. `status`: a supervisor's status from its last pass
        (AppContext.status); only the supervisors of datasources `readable` says the caller may
        read."""
        families = _families()
        for row in SpecRepository(session).all_active():
            if not readable(row.datasource):
                continue
            loop = status(row.supervisor_id)
            io = stored_spec(row.id, row.payload).spec.ioConfig
            labels = {
                "supervisor": row.supervisor_id,
                "datasource": row.datasource,
                "stream": str(io.topic or io.topicPattern),
            }
            _supervisor(families, session, loop, labels, io, self.access)
            totals = self.finished.totals(session, row.supervisor_id)
            if loop is not None:
                for live in loop.task_metrics.values():
                    _add(totals, live.rowStats)
                    _add(totals, live.model_dump())  # its counters (the dicts are not numbers)
            for name, metric in (*ROW_COUNTERS.items(), *TASK_COUNTERS.items()):
                families[metric].add(totals.get(name, 0), **labels)
            for state, count in TaskRepository(session).counts(row.supervisor_id).items():
                families["task/count"].add(count, **labels, state=state)
        return [*families.values(), self.publish.family(readable)]


def _families() -> dict[str, Family]:
    gauges = {
        "ingest/kafka/lag": "Total lag of the supervisor's partitions, in records.",
        "ingest/kafka/maxLag": "Largest lag of one partition, in records.",
        "ingest/kafka/avgLag": "Average lag of the partitions, in records.",
        "ingest/kafka/partitionLag": "Lag of each partition, in records.",
        "ingest/kafka/lag/time": "Lag in time, summed over partitions: how much older the "
        "oldest unread record is than the newest.",
        "ingest/kafka/maxLag/time": "Largest lag in time of one partition.",
        "ingest/kafka/avgLag/time": "Average lag in time of the partitions.",
        "ingest/kafka/partitionLag/time": "Lag in time of each partition.",
        "supervisor/healthy": "1 when the supervisor is healthy.",
        "supervisor/state": "1 for the supervisor's current state and detailed state.",
        "ingest/notices/queueSize": "Requests waiting for the supervisor's next pass.",
        "ingest/notices/last/time": "Duration of the supervisor's last pass.",
        "task/count": "The supervisor's tasks by state (reading, publishing, success, failed).",
    }
    counters = {
        **{m: f"Druid's {m}, summed over the supervisor's tasks." for m in ROW_COUNTERS.values()},
        **{m: f"Druid's {m}, summed over the supervisor's tasks." for m in TASK_COUNTERS.values()},
        "ingest/notices/time": "Time spent in the supervisor's passes.",
        "ingest/notices/count": "Passes the supervisor's loop ran.",
    }
    families = {m: Family(prometheus_name(m), "gauge", text) for m, text in gauges.items()}
    for metric, text in counters.items():
        families[metric] = Family(prometheus_name(metric, counter=True), "counter", text)
    return families


def time_lag(
    consumer_properties: Mapping[str, object],
    stream: str,
    latest: Offsets,
    lag: dict[PartitionKey, int],
) -> dict[PartitionKey, float]:
    """Druid's lag in time, per partition, in seconds: how much older the oldest unread record
    is than the newest one (Kafka timestamps; 0 when nothing is unread). Each partition that
    lags costs one read of two records."""
    behind: dict[PartitionKey, float] = dict.fromkeys(lag, 0.0)
    lagging = {p: n for p, n in lag.items() if n > 0}
    if not lagging:
        return behind
    reader = OffsetReader(consumer_properties, timeout=5.0)
    oldest = reader.record_times(stream, {p: latest[p] - n for p, n in lagging.items()})
    newest = reader.record_times(stream, {p: latest[p] - 1 for p in lagging})
    for partition in lagging:
        if partition in oldest and partition in newest:
            behind[partition] = max(0, newest[partition] - oldest[partition]) / 1000
    return behind


def _lag_family(
    families: dict[str, Family],
    unit: str,
    lag: dict[PartitionKey, int] | dict[PartitionKey, float],
    labels: dict[str, Any],
) -> None:
    """Druid's lag, maxLag, avgLag and partitionLag (in records; unit "/time": in seconds)."""
    total = sum(lag.values())
    families[f"ingest/kafka/lag{unit}"].add(total, **labels)
    families[f"ingest/kafka/maxLag{unit}"].add(max(lag.values(), default=0), **labels)
    families[f"ingest/kafka/avgLag{unit}"].add(total / len(lag) if lag else 0, **labels)
    for partition in sorted_keys(lag):
        families[f"ingest/kafka/partitionLag{unit}"].add(
            lag[partition], **labels, partition=partition
        )


def _supervisor(
    families: dict[str, Family],
    session: Session,
    loop: SupervisorStatus | None,
    labels: dict[str, Any],
    io: KafkaIOConfig,
    access: KafkaAccess,
) -> None:
    if loop is None:  # no loop runs (supervisors off): nothing observed yet
        return
    supervisor_id = labels["supervisor"]
    committed = offsets_from_json(OffsetsRepository(session).offsets(supervisor_id) or {})
    lag = partition_lag(committed, loop.current, loop.latest)
    _lag_family(families, "", lag, labels)
    stream = str(io.topic or io.topicPattern or "")
    behind = time_lag(access.service_config(io.consumerProperties), stream, loop.latest, lag)
    _lag_family(families, "/time", behind, labels)
    families["supervisor/healthy"].add(1 if loop.healthy else 0, **labels)
    families["supervisor/state"].add(
        1, **labels, state=loop.state, detailed_state=loop.detailed_state
    )
    families["ingest/notices/queueSize"].add(loop.queue_size, **labels)
    families["ingest/notices/last/time"].add(loop.last_pass_s, **labels)
    families["ingest/notices/time"].add(loop.pass_seconds, **labels)
    families["ingest/notices/count"].add(loop.pass_count, **labels)
