"""Every socket a stack listens on is where the operator put it (issue 43): `sluicegate serve`
and `sluicegate worker` on loopback, with the shared applications they start (each a Spark
driver), seen by `ss -ltnp`. A local master's driver used to take the machine's address."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from supervisor.devstack.kafka import LocalKafka
from supervisor.testkit.hosts import task_host
from supervisor.testkit.overlord import Overlord
from supervisor.testkit.service import BASE
from supervisor.testkit.waits import wait_for
from tasks.procfs import process_tree
from tests.conftest import words_spec, words_topic

pytestmark = [pytest.mark.kafka, pytest.mark.spark]
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}


def descendants(root: int) -> set[int]:
    """`root` and every process under it (by parent pid)."""
    return set(process_tree(root))


def listening(pids: set[int]) -> list[tuple[str, str, int]]:
    """(address, command, pid) of each listening TCP socket of these processes."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        local = line.split()[3]
        address = local.rsplit(":", 1)[0].strip("[]")
        for command, pid in re.findall(r'\("([^"]+)",pid=(\d+),', line):
            if int(pid) in pids:
                found.append((address, command, int(pid)))
    return found


def spark_started(log: Path) -> bool:
    return log.exists() and "Spark started" in log.read_text(errors="replace")


def test_a_stack_listens_only_where_the_operator_chose(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    overlord = Overlord(tmp_path, jar_cache, secure=False)
    overlord.start()
    try:
        # a supervisor: the overlord starts its own application (before any task host comes)
        topic = words_topic(kafka, "listen", 1)
        spec = words_spec("listen", topic, kafka.bootstrap_servers)
        assert httpx.post(f"{overlord.url}{BASE}", json=spec, timeout=30).is_success
        own = overlord.work / "host-app" / "app.log"
        wait_for(lambda: spark_started(own), 240, "the overlord's application")
        env = {**os.environ, "SLUICEGATE_JAR_CACHE": str(jar_cache)}
        with task_host(overlord.url, tmp_path / "host", env=env) as (_, worker):
            hosts = tmp_path / "host" / "host-app" / "app.log"
            wait_for(lambda: spark_started(hosts), 240, "the task host's application")
            assert overlord.process is not None
            pids = descendants(overlord.process.pid) | descendants(worker.pid)
            sockets = listening(pids)
            javas = [s for s in sockets if s[1] == "java"]
            # each driver: its Py4J gateway, RPC and block manager (and the overlord, the
            # worker, both applications' chat APIs)
            assert len(javas) >= 6, sockets
            assert {s[0] for s in sockets} <= LOOPBACK, sockets
    finally:
        overlord.stop()
