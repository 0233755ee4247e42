"""The cluster end to end: a Spark standalone cluster of two workers (`spark-local`) that
takes only applications knowing its secret, two task hosts (`sluicegate worker`, over TLS),
segments in a real S3 server (`s3-local`), PostgreSQL as the metadata DB, the overlord with
authentication and TLS. taskCount 2, replicas 2: the replicas of each group go to different
hosts; one host is SIGKILLed whole mid-read and its tasks are replaced on the other; three
rollovers later every record is published exactly once, the segments are in S3 and
`sluicegate sql` on the cluster sums them.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from supervisor.db.models import SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.postgres import LocalPostgres
from supervisor.devstack.s3 import LocalS3
from supervisor.devstack.spark import LocalSparkCluster
from supervisor.devstack.topics import create_topic
from supervisor.testkit.hosts import kill_tasks, task_host
from supervisor.testkit.numbers import Numbers
from supervisor.testkit.overlord import ADMIN, Overlord
from supervisor.testkit.waits import wait_for
from tests.e2e.harness import (
    BASE,
    LONG,
    TLS,
    VERIFY,
    Run,
    generations,
)
from tests.e2e.test_supervisor import SID, spec


@pytest.mark.long  # ~200 s: `make test-long` (its parts have their tests in `make test`)
@pytest.mark.timeout(3600)
def test_tasks_on_hosts_and_a_spark_cluster_publish_to_s3_exactly_once(
    kafka: LocalKafka, postgres: LocalPostgres, s3: LocalS3, jar_cache: Path, tmp_path: Path
) -> None:
    topic = f"numbers-{uuid.uuid4().hex[:8]}"
    secret = secrets.token_hex(16)
    create_topic(kafka.bootstrap_servers, topic, 3)
    prefix = f"e2e-{uuid.uuid4().hex[:8]}"
    db = postgres.create_database(f"cluster_{uuid.uuid4().hex[:8]}")
    shared = {
        **s3.environment(),
        "SSL_CERT_FILE": str(TLS.ca),
        # each host's application: an executor of 2 cores (its four replicas and successors)
        "SLUICEGATE_TASK_EXECUTOR_MEMORY": "1g",
        "SLUICEGATE_TASK_CORES": "2",
        # the cluster takes only applications that know its secret (issue 43)
        "SLUICEGATE_SPARK_SECRET": secret,
    }
    with LocalSparkCluster(
        tmp_path / "spark", workers=2, cores=8, memory="8g", secret=secret
    ) as cluster:
        overlord = Overlord(tmp_path, jar_cache, db_url=db)
        overlord.env.update(
            {
                **shared,
                "SLUICEGATE_TASK_MASTER": cluster.url,
                "SLUICEGATE_DEEP_STORAGE": f"s3://segments/{prefix}",
                "SLUICEGATE_WORKER_TIMEOUT_S": "8",
            }
        )
        overlord.start()
        host_env = {
            **os.environ,
            **shared,
            "SLUICEGATE_TASK_MASTER": cluster.url,
            "SLUICEGATE_JAR_CACHE": str(jar_cache),
            "SLUICEGATE_USER": ADMIN[0],
            "SLUICEGATE_PASSWORD": ADMIN[1],
        }
        # capacity 10: a group's two replicas and their successors, both groups on one host
        tls = ("--tls-cert", str(TLS.cert), "--tls-key", str(TLS.key))
        ledger = Numbers(kafka.bootstrap_servers, [topic], rate=30).start()
        try:
            with (
                httpx.Client(
                    base_url=overlord.url, timeout=30, auth=overlord.auth, verify=VERIFY
                ) as api,
                task_host(overlord.url, tmp_path / "host-a", 10, tls, host_env) as (host_a, proc),
                task_host(overlord.url, tmp_path / "host-b", 10, tls, host_env) as (host_b, _),
            ):
                run = Run(overlord, ledger, api, topic, storage=s3.storage(prefix))
                _scenario(run, api, kafka, cluster, tmp_path, host_a, host_b, proc)
                ledger.stop()
                ends = {str(p): ledger.next_offset(str(p)) for p in range(3)}
                wait_for(lambda: run.committed() == ends, LONG, "every record published")
                run.check()
                total = sum(ends.values())
                sql = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "supervisor.cli",
                        "sql",
                        f"SELECT SUM(count) AS c, SUM(n) AS s FROM {SID}",
                        "--url",
                        overlord.url,
                        "--master",
                        cluster.url,
                        "-o",
                        "json",
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                    env=host_env,
                    timeout=300,
                )
                paths = [r[0] for r in overlord.rows(select(SegmentRow.path))]
        finally:
            if not ledger.stopping.is_set():
                ledger.stop()
            overlord.stop()
    assert sql.returncode == 0, sql.stderr
    assert json.loads(sql.stdout) == [{"c": total, "s": total * (total - 1) // 2}]
    assert paths and all(p.startswith(f"s3://segments/{prefix}/{SID}/") for p in paths)


def _scenario(
    run: Run,
    api: httpx.Client,
    kafka: LocalKafka,
    cluster: LocalSparkCluster,
    tmp_path: Path,
    host_a: str,
    host_b: str,
    process_a: Any,
) -> None:
    body = spec(run.topic, kafka.bootstrap_servers)
    assert api.post(BASE, json=body).json() == {"id": SID}
    for group in (0, 1):
        replicas = run.reading_now(group, 2)
        hosts = {_host(run, t.id) for t in replicas}
        assert hosts == {host_a, host_b}, f"group {group}'s replicas share a host: {hosts}"

    # each host's one application runs on the Spark cluster, and the overlord runs none (its
    # supervisor came after the hosts; one it had started before them would have stopped)
    def apps() -> list[str]:
        return [a["name"] for a in cluster.state()["activeapps"]]  # type: ignore[index,union-attr]

    wait_for(lambda: len(apps()) == 2, 60, "the two hosts' applications alone")
    assert all(a.startswith("sluicegate-host-") for a in apps()), apps()
    # host A dies whole, mid-read: its worker and its tasks
    on_a = [t.id for t in run.tasks() if t.status == "RUNNING" and _host(run, t.id) == host_a]
    assert on_a
    os.killpg(process_a.pid, signal.SIGKILL)
    kill_tasks(tmp_path / "host-a")
    run.expected_failures.update(on_a)
    # each ends FAILED with its host, but a publishing one may have succeeded just before
    wait_for(lambda: "RUNNING" not in {_status(run, t) for t in on_a}, LONG, "host A's tasks")
    assert "FAILED" in {_status(run, t) for t in on_a}
    for group in (0, 1):
        replicas = run.reading_now(group, 2)
        assert {_host(run, t.id) for t in replicas} == {host_b}
    before = {g: len(generations(run, g)) for g in (0, 1)}
    wait_for(
        lambda: all(len(generations(run, g)) >= before[g] + 3 for g in (0, 1)),
        LONG,
        "three rollovers per group on the surviving host",
    )
    wait_for(lambda: run.committed() and run.check(), LONG, "a consistent published state")
    failed = [t for t in run.tasks() if t.status == "FAILED"]
    assert {t.id for t in failed} <= set(on_a), [(t.id, t.error) for t in failed]
    assert all(t.error == f"its task host {host_a} stopped heartbeating" for t in failed)
    listed = api.get("/druid/indexer/v1/workers").json()
    assert [w["worker"]["host"] for w in listed] == [host_b]


def _host(run: Run, task_id: str) -> str | None:
    rows = run.overlord.rows(select(TaskRow.worker).where(TaskRow.id == task_id))
    return rows[0][0] if rows else None


def _status(run: Run, task_id: str) -> str:
    return str(run.overlord.rows(select(TaskRow.status).where(TaskRow.id == task_id))[0][0])
