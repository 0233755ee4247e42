"""`make quickstart`: the main job on embedded defaults, started and stopped as one: a local
broker, the service, a topic loaded with sample edits and fed by a live stream of them, the
example supervisor, and a line of live progress until Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import click
import httpx

from supervisor.devstack import DevstackError
from supervisor.devstack.generator import EditStream
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.service import LocalService, serve_command
from supervisor.devstack.topics import create_topic, produce
from supervisor.net import reserve, wait_for_port

PARTITIONS = 3
SUPERVISORS = "/druid/indexer/v1/supervisor"
SEGMENTS = "/druid/coordinator/v1/metadata/datasources/{}/segments"


class Progress:
    """One line of live progress: edits streamed by this run, records read and published (all
    of the topic's, the sample included), segments, lag. Redrawn in place on a terminal;
    elsewhere a line every ten seconds."""

    def __init__(self, url: str, supervisor_id: str, datasource: str, edits: EditStream) -> None:
        self.http = httpx.Client(base_url=url, timeout=5, follow_redirects=True)
        self.supervisor_id = supervisor_id
        self.datasource = datasource
        self.edits = edits
        self.began = time.monotonic()
        self.tty = sys.stdout.isatty()
        self.last = 0.0
        self.every = 1.0 if self.tty else 10.0

    def line(self) -> str:
        try:
            status = self.http.get(f"{SUPERVISORS}/{self.supervisor_id}/status").json()["payload"]
            segments = self.http.get(SEGMENTS.format(self.datasource), params={"full": ""})
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            return f"(no status: {type(exc).__name__})"
        found = segments.json() if segments.status_code == 200 else []
        latest, lag = status["latestOffsets"], status["minimumLag"]
        read = sum(latest[p] - lag.get(p, 0) for p in latest)
        published = sum(status["committedOffsets"].values())
        return (
            f"{time.monotonic() - self.began:5.0f}s  {status['state']:<8} streamed "
            f"{self.edits.sent:,} new  read {read:,}  published {published:,} "
            f"({len(found)} segments, {sum(s['numRows'] for s in found):,} rolled-up rows)  "
            f"lag {status['aggregateLag']:,}"
        )

    def show(self) -> None:
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        if self.tty:
            click.echo(f"\r\x1b[2K{self.line()}", nl=False)
        else:
            click.echo(self.line())

    def done(self) -> None:
        if self.tty:
            click.echo()
        self.http.close()


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
        rate: float = 50.0,
    ) -> None:
        self.kafka_port = kafka_port
        self.port = port
        reserve(kafka_port, port)  # Kafka's controller port is drawn later: never one of these
        self.spec_path = spec_path
        self.data_path = data_path
        self.var_dir = var_dir
        self.once = once
        self.jar_cache = jar_cache
        self.rate = rate
        self.url = f"http://127.0.0.1:{port}"
        self.service: LocalService | None = None

    def _spec(self, bootstrap: str) -> dict[str, Any]:
        try:
            spec: dict[str, Any] = json.loads(self.spec_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DevstackError(f"cannot load {self.spec_path}: {exc}", usage=True) from None
        spec["spec"]["ioConfig"]["consumerProperties"]["bootstrap.servers"] = bootstrap
        return spec

    def _start_service(self) -> None:
        self.var_dir.mkdir(parents=True, exist_ok=True)
        command = serve_command(
            *("--port", str(self.port)),
            *("--metadata-url", f"sqlite:///{self.var_dir / 'sluicegate.db'}"),
            *("--deep-storage", str(self.var_dir / "segments")),
            *("--work-dir", str(self.var_dir / "work")),
        )
        # the quickstart's broker stops with it, so its tasks must too (tasks outlive a plain
        # `sluicegate serve`, which adopts them when it starts again)
        env = {**os.environ, "SLUICEGATE_KILL_TASKS_ON_EXIT": "true"}
        log = self.var_dir / "service.log"
        self.service = LocalService(command, self.url, log, self.var_dir, env).start()

    def _stop_service(self) -> None:
        service, self.service = self.service, None
        if service is not None:
            service.stop()

    def run(self) -> None:
        if wait_for_port("127.0.0.1", self.port, 0.2):
            raise DevstackError(f"port {self.port} is taken; pass --port", usage=True)
        interrupted: list[int] = []

        def _interrupt(signum: int, _frame: FrameType | None) -> None:
            interrupted.append(signum)

        previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
        broker = LocalKafka(self.var_dir / "kafka", self.jar_cache, port=self.kafka_port)
        edits: EditStream | None = None
        progress: Progress | None = None
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
                raise DevstackError(f"submitting the spec failed: {response.text}")
            supervisor_id = response.json()["id"]
            states = httpx.get(f"{self.url}/druid/indexer/v1/supervisor", params={"state": "true"})
            state = {entry["id"]: entry["state"] for entry in states.json()}.get(supervisor_id)
            click.echo(f"submitted supervisor {supervisor_id} (state {state})")
            if self.once:
                return
            edits = EditStream(broker.bootstrap_servers, topic, self.rate).start()
            datasource = spec["spec"]["dataSchema"]["dataSource"]
            click.echo(
                f"\n  service:  {self.url}\n  kafka:    {broker.bootstrap_servers} (topic {topic},"
                f" {self.rate:g} wiki edits/s)\n  watch:    sluicegate supervisor --url {self.url}"
                f" status {supervisor_id} --watch\n  query:    sluicegate sql --url {self.url} "
                f'"SELECT channel, SUM(added) FROM {datasource} GROUP BY 1 ORDER BY 2 DESC"\n'
                "  Ctrl-C stops everything.\n"
            )
            progress = Progress(self.url, supervisor_id, datasource, edits)
            while not interrupted:
                if self.service is not None and self.service.exited():
                    raise DevstackError(f"the service stopped; see {self.var_dir / 'service.log'}")
                progress.show()
                time.sleep(0.5)
        finally:
            if edits is not None:
                edits.stop()
            if progress is not None:
                progress.done()
            click.echo("stopping ...")
            self._stop_service()
            broker.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            click.echo(f"stopped. State is kept in {self.var_dir}; `make quickstart` resumes.")
