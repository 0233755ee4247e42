"""`make quickstart`: the main job on embedded defaults, started and stopped as one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import click
import httpx

from supervisor.cli.client import EXIT_USAGE, CliError
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.ports import wait_for_port
from supervisor.devstack.topics import create_topic, produce

PARTITIONS = 3


class Quickstart:
    def __init__(
        self,
        kafka_port: int,
        port: int,
        spec_path: Path,
        data_path: Path,
        var_dir: Path,
        once: bool,
        jar_cache: Path,
    ) -> None:
        self.kafka_port = kafka_port
        self.port = port
        self.spec_path = spec_path
        self.data_path = data_path
        self.var_dir = var_dir
        self.once = once
        self.jar_cache = jar_cache
        self.url = f"http://127.0.0.1:{port}"
        self.service: subprocess.Popen[bytes] | None = None

    def _spec(self, bootstrap: str) -> dict[str, Any]:
        try:
            spec: dict[str, Any] = json.loads(self.spec_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CliError(f"cannot load {self.spec_path}: {exc}", EXIT_USAGE) from None
        spec["spec"]["ioConfig"]["consumerProperties"]["bootstrap.servers"] = bootstrap
        return spec

    def _start_service(self) -> None:
        self.var_dir.mkdir(parents=True, exist_ok=True)
        log = (self.var_dir / "service.log").open("ab")
        self.service = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "supervisor.cli",
                "serve",
                "--port",
                str(self.port),
                "--metadata-url",
                f"sqlite:///{self.var_dir / 'sluicegate.db'}",
                "--deep-storage",
                str(self.var_dir / "segments"),
                "--work-dir",
                str(self.var_dir / "work"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # the quickstart's broker stops with it, so its tasks must too (tasks outlive a
            # plain `sluicegate serve`, which adopts them when it starts again)
            env={**os.environ, "SLUICEGATE_KILL_TASKS_ON_EXIT": "true"},
        )
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.service.poll() is not None:
                raise CliError(f"the service exited; see {self.var_dir / 'service.log'}", 1)
            try:
                if httpx.get(f"{self.url}/status/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise CliError(f"the service did not come up; see {self.var_dir / 'service.log'}", 1)

    def _stop_service(self) -> None:
        service, self.service = self.service, None
        if service is not None and service.poll() is None:
            service.terminate()
            try:
                service.wait(30)
            except subprocess.TimeoutExpired:
                service.kill()

    def run(self) -> None:
        if wait_for_port("127.0.0.1", self.port, 0.2):
            raise CliError(f"port {self.port} is taken; pass --port", EXIT_USAGE)
        interrupted: list[int] = []

        def _interrupt(signum: int, _frame: FrameType | None) -> None:
            interrupted.append(signum)

        previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
        broker = LocalKafka(self.var_dir / "kafka", self.jar_cache, port=self.kafka_port)
        try:
            click.echo(f"starting Kafka on 127.0.0.1:{self.kafka_port} ...")
            broker.start()
            spec = self._spec(broker.bootstrap_servers)
            topic = spec["spec"]["ioConfig"]["topic"]
            if create_topic(broker.bootstrap_servers, topic, PARTITIONS):
                lines = [ln for ln in self.data_path.read_bytes().splitlines() if ln.strip()]
                sent = produce(broker.bootstrap_servers, topic, ((None, ln) for ln in lines))
                click.echo(f"created topic {topic} ({PARTITIONS} partitions) with {sent} records")
            click.echo(f"starting the service on {self.url} ...")
            self._start_service()
            response = httpx.post(f"{self.url}/druid/indexer/v1/supervisor", json=spec, timeout=30)
            if response.status_code != 200:
                raise CliError(f"submitting the spec failed: {response.text}", 1)
            supervisor_id = response.json()["id"]
            states = httpx.get(f"{self.url}/druid/indexer/v1/supervisor", params={"state": "true"})
            state = {entry["id"]: entry["state"] for entry in states.json()}.get(supervisor_id)
            click.echo(f"submitted supervisor {supervisor_id} (state {state})")
            click.echo(
                f"\n  service:    {self.url}\n  kafka:      {broker.bootstrap_servers}\n"
                f"  try:        sluicegate supervisor --url {self.url} list\n"
            )
            while not self.once and not interrupted:
                if self.service is not None and self.service.poll() is not None:
                    raise CliError(f"the service stopped; see {self.var_dir / 'service.log'}", 1)
                time.sleep(0.5)
        finally:
            click.echo("stopping ...")
            self._stop_service()
            broker.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            click.echo(f"stopped. State is kept in {self.var_dir}; `make quickstart` resumes.")
