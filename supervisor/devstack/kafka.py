"""A real single-node Apache Kafka broker in KRaft mode, on loopback, from the resolved jars.

Used by `sluicegate kafka-local`, `make quickstart` and the test fixtures alike.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from types import TracebackType

from supervisor.net import free_port
from tasks.jars import jars, kafka_broker_bundle

HOST = "127.0.0.1"

_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
"""


class BrokerError(RuntimeError):
    """The broker could not be formatted or started."""


def _cluster_id() -> str:
    """A random KRaft cluster id. Like Kafka's own Uuid.randomUuid, never one starting with "-":
    kafka-storage's argument parser takes `-t -abc...` for a missing value (1 id in 64)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class LocalKafka:
    """One KRaft broker+controller. `start()` returns once clients can use it."""

    def __init__(
        self,
        data_dir: Path,
        jar_cache: Path,
        port: int = 0,
        java: str = "java",
        heap: str = "512m",
        log_level: str = "WARN",
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.jar_cache = jar_cache
        self.port = port or free_port()
        self.controller_port = free_port()
        self.java = java
        self.heap = heap
        self.log_level = log_level
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "broker.log"

    def _classpath(self) -> str:
        return os.pathsep.join(str(jar) for jar in jars(kafka_broker_bundle(), self.jar_cache))

    def _write_config(self) -> Path:
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(logs),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
        }
        config = self.data_dir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in props.items()))
        (self.data_dir / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.log_file, level=self.log_level)
        )
        return config

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            self.java,
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            self._classpath(),
            main,
            *args,
        ]

    def _format(self, config: Path) -> None:
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        result = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config)),
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BrokerError(
                f"formatting the KRaft log dir failed: {result.stdout}{result.stderr}"
            )

    def start(self, timeout: float = 90.0) -> LocalKafka:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        self._format(config)
        out = (self.data_dir / "broker.out").open("ab")
        self.process = subprocess.Popen(
            self._java("kafka.Kafka", str(config)),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise BrokerError(
                    f"the broker exited with {self.process.returncode}: {self._tail()}"
                )
            try:
                metadata = admin.list_topics(timeout=1.0)
                if metadata.brokers:
                    return
            except Exception:
                time.sleep(0.2)
        self.stop()
        raise BrokerError(f"the broker was not ready within {timeout:.0f}s: {self._tail()}")

    def _tail(self, lines: int = 20) -> str:
        text = ""
        for path in (self.data_dir / "broker.out", self.log_file):
            if path.exists():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return text or "(no output)"

    def request_stop(self) -> None:
        """Ask the broker to shut down (safe from a signal handler: it does not wait)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self) -> int:
        assert self.process is not None
        return self.process.wait()

    def stop(self, timeout: float = 30.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
