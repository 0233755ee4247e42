"""The Prometheus text of /metrics: names, labels, histograms."""

from __future__ import annotations

import pytest

from supervisor.services.metrics import Family, PublishLatency, prometheus_name


@pytest.mark.parametrize(
    ("druid", "counter", "name"),
    [
        ("ingest/kafka/lag", False, "sluicegate_ingest_kafka_lag"),
        ("ingest/kafka/maxLag", False, "sluicegate_ingest_kafka_max_lag"),
        (
            "ingest/events/processedWithError",
            True,
            "sluicegate_ingest_events_processed_with_error_total",
        ),
        ("ingest/handoff/time", True, "sluicegate_ingest_handoff_seconds_total"),
        ("ingest/notices/last/time", False, "sluicegate_ingest_notices_last_seconds"),
        ("ingest/persists/count", True, "sluicegate_ingest_persists_total"),
    ],
)
def test_druid_names_become_prometheus_names(druid: str, counter: bool, name: str) -> None:
    assert prometheus_name(druid, counter) == name


def test_a_family_renders_help_type_and_escaped_labels() -> None:
    family = Family("sluicegate_x", "gauge", "An example.")
    family.add(3, supervisor='we"ird\\name', partition="t:0")
    family.add(0.25, supervisor="b")
    assert family.render().splitlines() == [
        "# HELP sluicegate_x An example.",
        "# TYPE sluicegate_x gauge",
        'sluicegate_x{supervisor="we\\"ird\\\\name",partition="t:0"} 3',
        'sluicegate_x{supervisor="b"} 0.25',
    ]


def test_publish_latency_is_a_cumulative_histogram() -> None:
    latency = PublishLatency()
    for seconds in (0.003, 0.2, 0.2, 30.0):
        latency.observe("wiki", "published", seconds)
    lines = latency.family().render().splitlines()
    buckets = {
        line.split('le="')[1].split('"')[0]: float(line.split()[-1])
        for line in lines
        if "_bucket" in line
    }
    assert buckets["0.01"] == 1 and buckets["0.1"] == 1 and buckets["0.25"] == 3
    assert buckets["10.0"] == 3 and buckets["+Inf"] == 4
    assert 'sluicegate_publish_seconds_count{datasource="wiki",outcome="published"} 4' in lines
    assert any(
        line.startswith("sluicegate_publish_seconds_sum") and "30.403" in line for line in lines
    )
