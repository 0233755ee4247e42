"""A real single-node Apache Kafka broker in KRaft mode, on loopback, from the resolved jars.

Used by `sluicegate kafka-local`, `make quickstart` and the test fixtures alike.
"""

from __future__ import annotations

import base64
import os
import secrets
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Literal

from supervisor.devstack.certs import Certs, self_signed
from supervisor.devstack.server import Managed
from supervisor.net import free_port
from tasks.jars import jars, kafka_broker_bundle, kafka_tools_bundle

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


def scram_jaas(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";'
    )


def _cluster_id() -> str:
    """A random KRaft cluster id. Like Kafka's own Uuid.randomUuid, never one starting with "-":
    kafka-storage's argument parser takes `-t -abc...` for a missing value (1 id in 64)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


SCRAM = "SCRAM-SHA-512"
BROKER_USER = "broker"  # the broker's own SCRAM user (inter-broker)
CLIENT_USER = "sluicegate"  # the clients' SCRAM user


class LocalKafka(Managed):
    """One KRaft broker+controller. `start()` returns once clients can use it.

    `security="sasl_ssl"`: clients reach it over TLS (a self-signed CA written to
    `data_dir/tls/ca.pem`) and log in with SCRAM-SHA-512 as `sluicegate` (its password in
    `data_dir/tls/client-password`); `java_properties()` are the consumerProperties of a spec
    that reads from it, `client_config()` a librdkafka client's."""

    def __init__(
        self,
        data_dir: Path,
        jar_cache: Path,
        port: int = 0,
        java: str = "java",
        heap: str = "512m",
        log_level: str = "WARN",
        security: Literal["plaintext", "sasl_ssl"] = "plaintext",
        host: str = HOST,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.host = host  # the address it listens on and gives clients
        self.jar_cache = jar_cache
        self.port = port or free_port()
        self.controller_port = free_port()
        self.java = java
        self.heap = heap
        self.log_level = log_level
        self.security = security
        self.process: subprocess.Popen[bytes] | None = None
        self.certs: Certs | None = None
        self.passwords: dict[str, str] = {}

    def _secrets(self) -> None:
        """The CA, the broker's certificate and the SCRAM passwords (made once, kept)."""
        tls = self.data_dir / "tls"
        self.certs = self_signed(tls)
        for user in (BROKER_USER, CLIENT_USER):
            path = tls / f"{'client' if user == CLIENT_USER else user}-password"
            if not path.exists():
                path.write_text(secrets.token_urlsafe(18))
                path.chmod(0o600)
            self.passwords[user] = path.read_text().strip()

    def java_properties(self) -> dict[str, str]:
        """consumerProperties of a spec reading from this broker (Java client names)."""
        props = {"bootstrap.servers": self.bootstrap_servers}
        if self.security == "sasl_ssl":
            assert self.certs is not None
            props |= {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": SCRAM,
                "sasl.jaas.config": scram_jaas(CLIENT_USER, self.passwords[CLIENT_USER]),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.certificates": self.certs.ca.read_text(),
            }
        return props

    def client_config(self) -> dict[str, str]:
        """A librdkafka client's settings for this broker."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.security == "sasl_ssl":
            assert self.certs is not None
            config |= {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": SCRAM,
                "sasl.username": CLIENT_USER,
                "sasl.password": self.passwords[CLIENT_USER],
                "ssl.ca.location": str(self.certs.ca),
            }
        return config

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

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
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{self.host}:{self.port},"
            f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
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
        if self.security == "sasl_ssl":
            assert self.certs is not None
            listener = f"SASL_SSL://{self.host}:{self.port}"
            props |= {
                "listeners": f"{listener},CONTROLLER://{self.host}:{self.controller_port}",
                "advertised.listeners": listener,
                "inter.broker.listener.name": "SASL_SSL",
                "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
                "sasl.enabled.mechanisms": SCRAM,
                "sasl.mechanism.inter.broker.protocol": SCRAM,
                f"listener.name.sasl_ssl.{SCRAM.lower()}.sasl.jaas.config": scram_jaas(
                    BROKER_USER, self.passwords[BROKER_USER]
                ),
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.certs.keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.certs.ca),
                "ssl.endpoint.identification.algorithm": "https",
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

    def consumer_groups(self, *args: str, timeout: float = 120.0) -> str:
        """kafka-consumer-groups.sh against this (plaintext) broker: Kafka's
        ConsumerGroupCommand from its tools' jars, beside the broker's. Its output; BrokerError
        when it fails."""
        classpath = os.pathsep.join(
            str(jar)
            for jar in [
                *jars(kafka_broker_bundle(), self.jar_cache),
                *jars(kafka_tools_bundle(), self.jar_cache),
            ]
        )
        command = self._java(
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server",
            self.bootstrap_servers,
            *args,
        )
        command[command.index("-cp") + 1] = classpath
        if self.security != "plaintext":
            raise BrokerError("consumer_groups runs against a plaintext broker only")
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False
        )
        if result.returncode != 0:
            raise BrokerError(f"kafka-consumer-groups {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def _format(self, config: Path) -> None:
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        scram = [
            arg
            for user, password in self.passwords.items()
            for arg in ("--add-scram", f"{SCRAM}=[name={user},password={password}]")
        ]
        result = subprocess.run(
            self._java(
                "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config), *scram
            ),
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
        if self.security == "sasl_ssl":
            self._secrets()
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

        admin = AdminClient({**self.client_config(), "log_level": 0})
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

    def kill(self) -> None:
        """SIGKILL the broker, as a crash would: no shutdown, its data kept for `start`."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

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
