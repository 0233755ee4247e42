"""A running supervisor's live views on the real stack: status with the tasks' current offsets
and lag, stats, parseErrors, and the published segments in the coordinator's shape."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic, produce
from supervisor.testkit.service import RunningService, overlord_with_tasks
from supervisor.testkit.waits import wait_for

BASE = "/druid/indexer/v1/supervisor"
TASKS = "/druid/indexer/v1"
SEGMENTS = "/druid/coordinator/v1/metadata/datasources/{}/segments"


@pytest.fixture
def engine(tmp_path: Path, jar_cache: Path) -> Iterator[tuple[RunningService, httpx.Client]]:
    with overlord_with_tasks(tmp_path, jar_cache, "local[1]") as running:
        yield running


def spec(topic: str, bootstrap: str, datasource: str) -> dict[str, Any]:
    return supervisor_spec(
        datasource,
        topic,
        bootstrap,
        ["word"],
        segment_granularity="DAY",
        tuning={"maxParseExceptions": 100, "maxSavedParseExceptions": 10},
        period="PT1S",
        taskDuration="PT10M",
    )


LABEL_ORDER = ("supervisor", "datasource", "stream", "partition", "state", "outcome", "le")


def metrics(api: httpx.Client, openmetrics: bool = False) -> dict[str, float]:
    """The samples of GET /metrics, read by the Prometheus client library's own parser (the
    OpenMetrics one when asked for in that format), keyed by name and labels as written here."""
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as openmetrics_families,
    )
    from prometheus_client.parser import text_string_to_metric_families

    accept = "application/openmetrics-text; version=1.0.0" if openmetrics else "*/*"
    response = api.get("/metrics", headers={"Accept": accept})
    wanted = "application/openmetrics-text" if openmetrics else "text/plain; version=0.0.4"
    assert response.headers["content-type"].startswith(wanted)
    parse = openmetrics_families if openmetrics else text_string_to_metric_families
    samples = {}
    for family in parse(response.text):
        for sample in family.samples:
            names = sorted(sample.labels, key=lambda n: (*LABEL_ORDER, n).index(n))
            labels = ",".join(f'{n}="{sample.labels[n]}"' for n in names)
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def lint(api: httpx.Client, openmetrics: bool = False) -> list[str]:
    """What Prometheus' own linter (`promtool check metrics`, Debian's prometheus package,
    installed by `make setup`) finds wrong in GET /metrics: one line per finding."""
    accept = "application/openmetrics-text; version=1.0.0" if openmetrics else "*/*"
    body = api.get("/metrics", headers={"Accept": accept}).content
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: `make setup` installs Debian's prometheus package"
    run = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    findings = [line for line in run.stdout.decode().splitlines() if line.strip()]
    findings += [line for line in run.stderr.decode().splitlines() if line.strip()]
    assert (run.returncode == 0) == (findings == []), (run.returncode, findings)
    return findings


def test_live_status_stats_parse_errors_and_segments(kafka: LocalKafka, engine: Any) -> None:
    _, api = engine
    topic, ds = f"live-{uuid.uuid4().hex[:8]}", "live"
    create_topic(kafka.bootstrap_servers, topic, 2)
    good = [
        (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": f"w{i}"}).encode())
        for i in range(40)
    ]
    bad = [(None, b"{not json " + str(i).encode()) for i in range(3)]
    produce(kafka.bootstrap_servers, topic, good[:20] + bad, partition=0)
    produce(kafka.bootstrap_servers, topic, good[20:], partition=1)
    assert api.get(SEGMENTS.format(ds)).status_code == 404  # nothing published yet
    assert api.post(BASE, json=spec(topic, kafka.bootstrap_servers, ds)).is_success

    def caught_up() -> dict[str, Any] | None:
        payload = api.get(f"{BASE}/{ds}/status").json()["payload"]
        tasks = payload["activeTasks"]
        if tasks and tasks[0]["currentOffsets"] == {"0": 23, "1": 20}:
            return dict(payload)
        return None

    status = wait_for(caught_up, 300, "the task to read everything")
    assert status["latestOffsets"] == {"0": 23, "1": 20}
    assert status["aggregateLag"] == 0 and status["minimumLag"] == {"0": 0, "1": 0}
    assert status["activeTasks"][0]["lag"] == {"0": 0, "1": 0}
    assert status["committedOffsets"] == {}  # read, not yet published
    # every listing gives the state the loop saw (Druid's ?full, ?system, ?state=true)
    for listing in ("full", "system", "state"):
        entry = next(e for e in api.get(BASE, params={listing: "true"}).json() if e["id"] == ds)
        assert (entry["state"], entry["detailedState"], entry["healthy"]) == (
            "RUNNING",
            "RUNNING",
            True,
        ), listing
    task_id = status["activeTasks"][0]["id"]

    totals = api.get(f"{BASE}/{ds}/stats").json()["0"][task_id]["totals"]["buildSegments"]
    assert totals["processed"] == 40 and totals["unparseable"] == 3

    def averaged() -> dict[str, Any] | None:
        stats = api.get(f"{BASE}/{ds}/stats").json()["0"][task_id]
        averages: dict[str, Any] = stats["movingAverages"]["buildSegments"]
        return averages if averages["1m"]["processed"] > 0 else None

    # Druid's moving averages: rates a second, counted a tick (5 s) after the rows were read
    averages = wait_for(averaged, 30, "the 1m average to count the rows read")
    assert sorted(averages) == ["15m", "1m", "5m"]
    assert all(sorted(rates) == sorted(totals) for rates in averages.values())
    assert all(0 < rates["processed"] <= 40 / 5 for rates in averages.values())
    live = api.get(f"{TASKS}/task/{task_id}/reports").json()["ingestionStatsAndErrors"]
    row_stats = live["payload"]["rowStats"]  # a running task's: Druid's live report
    assert row_stats["totals"]["buildSegments"]["processed"] == 40
    assert sorted(row_stats["movingAverages"]["buildSegments"]) == ["15m", "1m", "5m"]
    errors = api.get(f"{BASE}/{ds}/parseErrors").json()
    assert [(e["taskId"], e["partition"], e["offset"]) for e in errors] == [
        (task_id, 0, 20),
        (task_id, 0, 21),
        (task_id, 0, 22),
    ]
    assert errors[0]["input"].startswith("{not json") and errors[0]["details"][0]

    # /metrics: the same figures under Prometheus names, in either format
    labels = f'{{supervisor="{ds}",datasource="{ds}",stream="{topic}"}}'
    reading = metrics(api)
    assert metrics(api, openmetrics=True)[f"sluicegate_ingest_kafka_lag{labels}"] == 0
    assert reading[f"sluicegate_ingest_events_processed_total{labels}"] == 40
    assert reading[f"sluicegate_ingest_events_unparseable_total{labels}"] == 3
    assert reading[f"sluicegate_ingest_kafka_lag{labels}"] == 0
    assert reading[f"sluicegate_ingest_kafka_max_lag{labels}"] == 0
    assert reading[f'sluicegate_ingest_kafka_partition_lag{labels[:-1]},partition="1"}}'] == 0
    assert reading[f'sluicegate_tasks{labels[:-1]},state="reading"}}'] == 1
    assert reading[f"sluicegate_ingest_persists_total{labels}"] >= 1
    assert reading[f"sluicegate_supervisor_healthy{labels}"] == 1
    assert reading[f"sluicegate_ingest_notices_total{labels}"] >= 1

    assert api.post(f"{BASE}/{ds}/taskGroups/handoff", json={"taskGroupIds": [0]}).is_success
    wait_for(
        lambda: (
            api.get(f"{BASE}/{ds}/status").json()["payload"]["committedOffsets"]
            == {"0": 23, "1": 20}
        ),
        300,
        "the handoff to publish",
    )
    published = wait_for(
        lambda: (m := metrics(api)).get(f'sluicegate_tasks{labels[:-1]},state="success"}}') and m,
        120,
        "the task's success in /metrics",
    )
    assert published[f"sluicegate_ingest_handoff_total{labels}"] >= 1
    assert published[f"sluicegate_ingest_events_processed_total{labels}"] >= 40
    outcome = f'{{datasource="{ds}",outcome="published"}}'
    assert published[f"sluicegate_publish_seconds_count{outcome}"] >= 1
    assert published[f"sluicegate_ingest_kafka_lag{labels}"] == 0
    # every family the service writes (a histogram's samples included) passes Prometheus' linter
    assert lint(api) == []
    # promtool has no OpenMetrics parser (prometheus/prometheus#8932): it reads that format with
    # its text parser, which takes a counter's `_total` samples for help-less untyped metrics of
    # their own. That is all it may find there; the client library's strict OpenMetrics parser
    # read the same exposition above.
    counters = {n for n in published if n.endswith("_total" + labels)}
    assert lint(api, openmetrics=True) == sorted(
        f"{n.removesuffix(labels)} no help text" for n in counters
    )
    ids = api.get(SEGMENTS.format(ds)).json()
    full = api.get(SEGMENTS.format(ds), params={"full": ""}).json()
    assert [s["identifier"] for s in full] == ids and ids
    assert {s["dataSource"] for s in full} == {ds}
    assert all(s["interval"] == "2026-11-22T00:00:00.000Z/2026-11-23T00:00:00.000Z" for s in full)
    words = []
    for segment in full:
        assert segment["loadSpec"]["type"] == "local"
        words += pq.read_table(segment["loadSpec"]["path"]).column("word").to_pylist()
    assert sorted(words) == sorted(f"w{i}" for i in range(40))
    assert sum(s["numRows"] for s in full) == 40 and "word" in full[0]["dimensions"]
    assert api.get(f"{BASE}/nope/stats").status_code == 404
    assert api.get(f"{BASE}/nope/parseErrors").status_code == 404

    # lag in time: suspended, two records five seconds apart (by their Kafka timestamps) wait
    # on partition 0, so it is 5 s behind; partition 1 is not behind at all
    assert api.post(f"{BASE}/{ds}/suspend").is_success
    wait_for(
        lambda: not api.get(f"{BASE}/{ds}/status").json()["payload"]["activeTasks"],
        120,
        "the suspended supervisor's tasks to end",
    )
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for offset, moment in enumerate((1_795_000_000_000, 1_795_000_005_000)):
        producer.produce(topic, b"{}", partition=0, timestamp=moment, key=str(offset).encode())
    assert producer.flush(30) == 0

    def partition(number: int) -> str:
        return labels[:-1] + f',partition="{number}"}}'

    behind = wait_for(
        lambda: (
            (m := metrics(api)).get(f"sluicegate_ingest_kafka_partition_lag{partition(0)}") == 2
            and m
        ),
        60,
        "partition 0 to lag by the two records",
    )
    assert behind[f"sluicegate_ingest_kafka_partition_lag_seconds{partition(0)}"] == 5.0
    assert behind[f"sluicegate_ingest_kafka_partition_lag_seconds{partition(1)}"] == 0
    assert behind[f"sluicegate_ingest_kafka_max_lag_seconds{labels}"] == 5.0
    assert behind[f"sluicegate_ingest_kafka_lag{labels}"] == 2


def test_kafka_lag_tools_see_the_committed_offsets(
    kafka: LocalKafka, tmp_path: Path, jar_cache: Path
) -> None:
    """After a publish the consumer group <SLUICEGATE_CONSUMER_GROUP_PREFIX><id> holds the
    committed offsets, and Kafka's own kafka-consumer-groups.sh --describe shows the
    supervisor's lag from them; resetOffsets moves them and reset deletes them."""
    with overlord_with_tasks(
        tmp_path, jar_cache, "local[1]", consumer_group_prefix="acme.prod-"
    ) as (_, api):
        _lag_tools_see_the_group(kafka, api, "acme.prod-grouped")


def _lag_tools_see_the_group(kafka: LocalKafka, api: httpx.Client, group: str) -> None:
    from tasks.kafka_offsets import OffsetReader

    topic, ds = f"group-{uuid.uuid4().hex[:8]}", "grouped"
    create_topic(kafka.bootstrap_servers, topic, 2)
    for partition in (0, 1):
        rows = [{"ts": "2026-11-22T10:00:00Z", "word": f"w{i}"} for i in range(10)]
        produce(
            kafka.bootstrap_servers,
            topic,
            [(None, json.dumps(r).encode()) for r in rows],
            partition=partition,
        )
    assert api.post(BASE, json=spec(topic, kafka.bootstrap_servers, ds)).is_success
    reader = OffsetReader(kafka.client_config())

    def status() -> dict[str, Any]:
        payload: dict[str, Any] = api.get(f"{BASE}/{ds}/status").json()["payload"]
        return payload

    # read before the handoff: one that reaches the task before its first batch publishes an
    # empty range, and the next publish would be a taskDuration (10 minutes) later
    wait_for(
        lambda: [t for t in status()["activeTasks"] if t["currentOffsets"] == {"0": 10, "1": 10}],
        300,
        "the task to read every record",
    )
    assert api.post(f"{BASE}/{ds}/taskGroups/handoff", json={"taskGroupIds": [0]}).is_success
    wait_for(lambda: status()["committedOffsets"] == {"0": 10, "1": 10}, 300, "the publish")
    wait_for(
        lambda: reader.group_offsets(group) == {(topic, 0): 10, (topic, 1): 10},
        60,
        "the consumer group to hold the committed offsets",
    )
    assert reader.group_offsets(f"sluicegate-{ds}") == {}  # the prefix replaces the default
    # three more records: the group's lag as Kafka's own tool describes it
    more = [(None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": "x"}).encode())] * 3
    produce(kafka.bootstrap_servers, topic, more, partition=1)
    described = kafka.consumer_groups("--describe", "--group", group)
    lags = {
        int(fields[2]): (int(fields[3]), int(fields[4]), int(fields[5]))
        for line in described.splitlines()
        if (fields := line.split()) and fields[0] == group and fields[1] == topic
    }
    assert lags == {0: (10, 10, 0), 1: (10, 13, 3)}, described  # CURRENT, LOG-END, LAG

    assert api.post(f"{BASE}/{ds}/suspend").is_success
    wait_for(
        lambda: status()["committedOffsets"] == {"0": 10, "1": 13}, 300, "the suspend's publish"
    )
    wait_for(
        lambda: reader.group_offsets(group) == {(topic, 0): 10, (topic, 1): 13},
        60,
        "the group to follow the publish",
    )
    body = {
        "type": "kafka",
        "partitions": {"type": "end", "stream": topic, "partitionOffsetMap": {"0": 4}},
    }
    assert api.post(f"{BASE}/{ds}/resetOffsets", json=body).is_success
    wait_for(
        lambda: reader.group_offsets(group) == {(topic, 0): 4, (topic, 1): 13},
        60,
        "the group to follow resetOffsets",
    )
    assert api.post(f"{BASE}/{ds}/reset").is_success
    wait_for(lambda: reader.group_offsets(group) == {}, 60, "the group deleted by reset")
