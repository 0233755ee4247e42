"""Reading from a SASL_SSL broker (SCRAM-SHA-512 over TLS with a self-signed CA), as a
secured production cluster is: a spec holds the Java client's properties (the JAAS config
named through Druid's dynamic config provider, not held), and both read paths take them:
the Python workers' librdkafka consumers (mapped to librdkafka's names) and Spark's Kafka
source (a transform sends the batches to the Spark SQL engine); the service's own readers
of partitions, offsets and lag work against it too."""

from __future__ import annotations

import json
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.kafka import CLIENT_USER, LocalKafka
from supervisor.devstack.topics import create_topic, produce
from supervisor.testkit.service import db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec

BASE = "/druid/indexer/v1/supervisor"
COUNT = 300


def secured_spec(
    supervisor_id: str, topic: str, broker: LocalKafka, inline: bool = False
) -> dict[str, Any]:
    """A spec reading `topic` from the SASL_SSL broker: its JAAS config (the password) named
    through Druid's environment provider, or held inline."""
    spec = words_spec(supervisor_id, topic, broker.bootstrap_servers)
    props = broker.java_properties()
    if not inline:
        del props["sasl.jaas.config"]  # the spec names it; the tasks' environment holds it
        props["druid.dynamic.config.provider"] = {
            "type": "environment",
            "variables": {"sasl.jaas.config": "SG_TEST_KAFKA_JAAS"},
        }
    spec["spec"]["ioConfig"]["consumerProperties"] = props
    return spec


@pytest.mark.kafka
@pytest.mark.spark
def test_both_read_paths_and_the_lag_readers_over_sasl_ssl(
    secure_kafka: LocalKafka, jar_cache: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("SG_TEST_KAFKA_JAAS", secure_kafka.java_properties()["sasl.jaas.config"])
    client = secure_kafka.client_config()
    topic = "secured-words"
    create_topic(secure_kafka.bootstrap_servers, topic, 1, client=client)
    record = (None, json.dumps({"ts": "2026-11-22T10:00:00Z", "word": "w"}).encode())
    produce(secure_kafka.bootstrap_servers, topic, [record] * COUNT, client=client)
    direct = secured_spec("direct", topic, secure_kafka, inline=True)
    spark = secured_spec("spark", topic, secure_kafka)
    spark["spec"]["dataSchema"]["transformSpec"] = {
        "transforms": [{"type": "expression", "name": "copy", "expression": "word"}]
    }
    with overlord_with_tasks(tmp_path, jar_cache, "local[1]", spec_environment="SG_TEST_.*") as (
        service,
        api,
    ):
        for body in (direct, spark):
            assert api.post(BASE, json=body).status_code == 200
        for name in ("direct", "spark"):
            # the service's own reader: the topic's latest offset, and the lag behind it
            wait_for(lambda n=name: _latest(api, n) == {"0": COUNT}, 120, f"{name}'s offsets")
        for name in ("direct", "spark"):
            # a handoff of a group with no task reading is ignored (as Druid does): ask once
            # the task has read everything (Spark's start is slow on a loaded machine)
            wait_for(lambda n=name: _read(api, n) == {"0": COUNT}, 240, f"{name}'s task reading")
        for name in ("direct", "spark"):
            api.post(f"{BASE}/{name}/taskGroups/handoff", json={"taskGroupIds": [0]})
        for name in ("direct", "spark"):
            wait_for(lambda n=name: _rows(service, n) == COUNT, 240, f"{name}'s rows")
            assert api.get(f"{BASE}/{name}/status").json()["payload"]["aggregateLag"] == 0
        # the first generation of each has published: its report.json, once it has exited
        counters = wait_for(lambda: _counters(service), 60, "both first tasks' reports")
        # the password answers nowhere: statuses (recentErrors too), reports, logs (issue 43)
        password = secure_kafka.passwords[CLIENT_USER]
        for name in ("direct", "spark"):
            assert password not in api.get(f"{BASE}/{name}/status").text
            assert password not in api.get(f"{BASE}/{name}").text  # the spec read back
            assert password not in api.get(f"{BASE}/{name}/history").text
        for row in db_rows(service, select(TaskRow.id)):
            for part in ("reports", "log", "status"):
                answer = api.get(f"/druid/indexer/v1/task/{row[0]}/{part}")
                assert password not in answer.text, (row[0], part)
    # nor in any file the overlord, its application and its tasks wrote (task and application
    # logs, reports, work files) but the two that must keep what the direct spec held inline:
    # the metadata DB and each of its tasks' payload, both the owner's only
    secret = password.encode()
    holding = [p for p in tmp_path.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert holding and {p.name for p in holding} <= {"meta.db", "meta.db-wal", "payload.json"}
    for payload in (p for p in holding if p.name == "payload.json"):
        held = json.loads(payload.read_text())  # a task of the direct spec: the other named it
        assert held["supervisorId"] == "direct", payload
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in holding), holding
    # the direct supervisor's batches were read by librdkafka, the other's by Spark's source
    assert counters["direct"]["directReads"] == counters["direct"]["persists"] > 0
    assert counters["spark"]["fastPersists"] == counters["spark"]["directReads"] == 0
    assert counters["spark"]["persists"] > 0


def _counters(service: Any) -> dict[str, Counter[str]] | None:
    """Each supervisor's task counters, summed over the reports of its published tasks; None
    until each has one."""
    counters: dict[str, Counter[str]] = {"direct": Counter(), "spark": Counter()}
    query = select(TaskRow.supervisor_id, TaskRow.status, TaskRow.log_path)
    for supervisor_id, status, log_path in db_rows(service, query):
        report = Path(str(log_path)).parent / "report.json"
        if status == "SUCCESS" and report.exists():
            try:
                counters[supervisor_id].update(json.loads(report.read_text())["counters"])
            except ValueError:  # being written
                return None
    return counters if all(c["persists"] for c in counters.values()) else None


def _latest(api: httpx.Client, supervisor_id: str) -> dict[str, int] | None:
    payload = api.get(f"{BASE}/{supervisor_id}/status").json()["payload"]
    return payload.get("latestOffsets")


def _read(api: httpx.Client, supervisor_id: str) -> dict[str, int] | None:
    """The offsets the supervisor's one reading task has reached; None before it reads."""
    payload = api.get(f"{BASE}/{supervisor_id}/status").json()["payload"]
    reading = [t["currentOffsets"] for t in payload["activeTasks"] if t.get("currentOffsets")]
    return reading[0] if len(reading) == 1 else None


def _rows(service: Any, supervisor_id: str) -> int:
    rows = db_rows(
        service, select(SegmentRow.num_rows).where(SegmentRow.datasource == supervisor_id)
    )
    return sum(row[0] for row in rows)
