"""The Prometheus text of /metrics: names, labels, histograms."""

from __future__ import annotations

import pytest

from supervisor.services.metrics import Family, PublishLatency, exposition, prometheus_name


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
        ("task/count", False, "sluicegate_tasks"),  # _count is a histogram's (promtool)
        ("ingest/notices/count", True, "sluicegate_ingest_notices_total"),
    ],
)
def test_druid_names_become_prometheus_names(druid: str, counter: bool, name: str) -> None:
    assert prometheus_name(druid, counter) == name


OPENMETRICS = "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5"


def _families() -> list[Family]:
    gauge = Family("sluicegate_x", "gauge", "An example.")
    gauge.add(3, supervisor='we"ird\\name\nline', partition="t:0")
    gauge.add(0.25, supervisor="b", partition="t:1")
    counter = Family("sluicegate_ingest_persists_total", "counter", "Persists.")
    counter.add(7, supervisor="b")
    latency = PublishLatency()
    latency.observe("wiki", "published", 0.2)
    return [gauge, counter, latency.family()]


def test_the_client_library_parses_what_metrics_writes_in_either_format() -> None:
    """Prometheus' text format by default; OpenMetrics when the Accept header asks for it.
    Each is read back by the library's own parser: the same names, labels (escaping
    included) and values."""
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as openmetrics_families,
    )
    from prometheus_client.parser import text_string_to_metric_families

    text, content_type = exposition(_families(), None)
    assert content_type.startswith("text/plain; version=0.0.4")
    om, om_type = exposition(_families(), OPENMETRICS)
    assert om_type.startswith("application/openmetrics-text; version=1.0.0")
    assert om.decode().endswith("# EOF\n")
    for parse, body in ((text_string_to_metric_families, text), (openmetrics_families, om)):
        found = {m.name: m for m in parse(body.decode())}
        (odd, plain) = found["sluicegate_x"].samples
        assert odd.labels == {"supervisor": 'we"ird\\name\nline', "partition": "t:0"}
        assert (odd.value, plain.value) == (3, 0.25) and found["sluicegate_x"].type == "gauge"
        persists = found["sluicegate_ingest_persists"]  # the family's name; samples end _total
        assert persists.type == "counter"
        (persisted,) = persists.samples
        assert (persisted.name, persisted.value) == ("sluicegate_ingest_persists_total", 7)
        histogram = found["sluicegate_publish_seconds"]
        assert histogram.type == "histogram"
        count = next(s for s in histogram.samples if s.name.endswith("_count"))
        assert count.value == 1 and count.labels == {"datasource": "wiki", "outcome": "published"}


def test_publish_latency_is_a_cumulative_histogram() -> None:
    latency = PublishLatency()
    for seconds in (0.003, 0.2, 0.2, 30.0):
        latency.observe("wiki", "published", seconds)
    samples = latency.family().metric().samples
    buckets = {s.labels["le"]: s.value for s in samples if s.name.endswith("_bucket")}
    assert buckets["0.01"] == 1 and buckets["0.1"] == 1 and buckets["0.25"] == 3
    assert buckets["10.0"] == 3 and buckets["+Inf"] == 4
    (count,) = (s for s in samples if s.name == "sluicegate_publish_seconds_count")
    assert count.value == 4
    (total,) = (s for s in samples if s.name == "sluicegate_publish_seconds_sum")
    assert abs(total.value - 30.403) < 1e-9


@pytest.mark.parametrize(
    "accept", ["application/openmetrics-text; version=abc", "text/plain; version=x.y", "*/*", ""]
)
def test_an_accept_header_it_cannot_read_gets_the_text_format(accept: str) -> None:
    body, content_type = exposition(_families(), accept)
    assert content_type.startswith("text/plain; version=0.0.4")
    assert b"# TYPE sluicegate_x gauge" in body
