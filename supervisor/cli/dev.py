"""Commands that run the dev stack here: the local broker, PostgreSQL, Spark cluster, S3 server
and schema registry, quickstart, and jar resolution (the service itself: serve.py)."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from supervisor.cli.client import EXIT_USAGE, CliError
from supervisor.cli.common import load_settings

if TYPE_CHECKING:
    pass


@click.command("kafka-local")
@click.option("--port", type=click.IntRange(0, 65535), default=9092, show_default=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/kafka"),
    show_default=True,
)
@click.option(
    "--security",
    type=click.Choice(["plaintext", "sasl_ssl"]),
    default="plaintext",
    show_default=True,
    help="sasl_ssl: SCRAM-SHA-512 over TLS, with a self-signed CA written under DATA_DIR/tls.",
)
def kafka_local(port: int, data_dir: Path, security: str) -> None:
    """Run a real single-node Apache Kafka broker (KRaft) on 127.0.0.1 until SIGINT/SIGTERM."""
    from supervisor.devstack.kafka import BrokerError, LocalKafka
    from tasks.jars import JarsMissingError

    mode: Any = security
    broker = LocalKafka(data_dir, load_settings().jar_cache, port=port, security=mode)

    def start() -> None:
        broker.start()
        click.echo(
            f"Kafka {_kafka_version()} ready at {broker.bootstrap_servers} "
            f"(data in {data_dir}); Ctrl-C stops it"
        )
        if security == "sasl_ssl":
            assert broker.certs is not None
            click.echo(
                f"SASL_SSL, SCRAM-SHA-512 user sluicegate (password in {data_dir}/tls/"
                f"client-password), CA {broker.certs.ca}; a spec's consumerProperties:"
            )
            click.echo(json.dumps(broker.java_properties(), indent=2))

    _in_foreground(
        "Kafka",
        start,
        lambda: broker.wait() if broker.process is not None else 0,
        broker.request_stop,
        broker.stop,
        (BrokerError, JarsMissingError),
        str(broker.log_file),
    )


def _in_foreground(
    name: str,
    start: Callable[[], None],
    wait: Callable[[], int],
    interrupt: Callable[[], None],
    stop: Callable[[], None],
    errors: tuple[type[Exception], ...],
    logs: str,
) -> None:
    """A `*-local` server until SIGINT/SIGTERM (which `interrupt` turns into `wait` returning):
    `start` starts it and says so, `stop` ends what it started, whatever happened. Its errors
    and an exit of its own are one line."""
    stopping: list[int] = []

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        interrupt()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        start()
        code = wait()
    except errors as exc:
        raise CliError(str(exc).splitlines()[0], 1) from None
    finally:
        stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if stopping:
        click.echo(f"{name} stopped")
    elif code != 0:
        raise CliError(f"{name} exited with code {code}; see {logs}", 1)


@click.command("postgres-local")
@click.option("--port", type=click.IntRange(1, 65535), default=5432, show_default=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/postgres"),
    show_default=True,
)
def postgres_local(port: int, data_dir: Path) -> None:
    """Run a real PostgreSQL (Debian's package) on 127.0.0.1 until SIGINT/SIGTERM: the metadata
    DB that several `sluicegate serve` share. Its data is kept in --data-dir for the next run."""
    from supervisor.devstack.postgres import LocalPostgres, PostgresError

    try:
        server = LocalPostgres(data_dir, port)
    except PostgresError as exc:
        raise CliError(str(exc).splitlines()[0], 1) from None
    stopping: list[int] = []

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        click.echo(
            f"PostgreSQL ready at {server.public_url()} (data in {data_dir}); Ctrl-C stops it\n"
            f"  sluicegate serve --metadata-url {server.public_url()}"
        )
        up = server.wait(stopping)
    except PostgresError as exc:
        raise CliError(str(exc).splitlines()[0], 1) from None
    finally:
        try:
            server.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if not stopping and not up:
        raise CliError(f"PostgreSQL exited by itself; see {server.log}", 1)
    click.echo("PostgreSQL stopped")


@click.command("spark-local")
@click.option("--workers", type=click.IntRange(1, 16), default=2, show_default=True)
@click.option(
    "--cores",
    type=click.IntRange(1, 256),
    default=8,
    show_default=True,
    help="Cores each worker offers executors (may exceed the machine's: each task's "
    "application takes SLUICEGATE_TASK_CORES of them).",
)
@click.option(
    "--memory",
    default="8g",
    show_default=True,
    help="Memory each worker offers executors (Spark's size syntax: 512m, 8g).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=7077, show_default=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/spark"),
    show_default=True,
)
def spark_local(workers: int, cores: int, memory: str, port: int, data_dir: Path) -> None:
    """Run a real Spark standalone cluster on 127.0.0.1 (a Master and WORKERS Workers from
    pyspark's own jars) until SIGINT/SIGTERM; tasks use it with SLUICEGATE_TASK_MASTER. With
    SLUICEGATE_SPARK_SECRET set, it takes only applications that know that secret (the
    overlord's and task hosts' drivers, given the same variable)."""
    import os

    from supervisor.devstack.spark import LocalSparkCluster, SparkClusterError
    from tasks.spark.session import CLUSTER_SECRET

    if not _SPARK_SIZE.fullmatch(memory):
        raise CliError(f"--memory {memory!r}: a size such as 512m or 8g", EXIT_USAGE)
    secret = os.environ.get(CLUSTER_SECRET) or None
    cluster = LocalSparkCluster(data_dir, workers, cores, memory, port, secret=secret)
    auth = f"authenticated ({CLUSTER_SECRET})" if secret else "unauthenticated"

    def start() -> None:
        cluster.start()
        click.echo(
            f"Spark master ready at {cluster.url} with {workers} workers of {cores} cores and "
            f"{memory}, {auth} (web UI {cluster.ui_url}, logs in {data_dir}/logs); Ctrl-C "
            f"stops it\n  SLUICEGATE_TASK_MASTER={cluster.url} sluicegate serve"
        )

    def interrupt() -> None:
        if cluster.processes:
            cluster.processes[0].terminate()  # the wait returns; stop() ends the rest

    _in_foreground(
        "Spark",
        start,
        cluster.wait,
        interrupt,
        cluster.stop,
        (SparkClusterError,),
        f"{data_dir}/logs",
    )


@click.command("s3-local")
@click.option("--port", type=click.IntRange(0, 65535), default=8333, show_default=True)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/s3"),
    show_default=True,
)
@click.option("--bucket", default="sluicegate", show_default=True, help="Made at start.")
def s3_local(port: int, data_dir: Path, bucket: str) -> None:
    """Run a real S3-compatible server (SeaweedFS, built by `make setup`) on 127.0.0.1 until
    SIGINT/SIGTERM. It takes the credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY
    (printed defaults when both are unset); its data stays in --data-dir."""
    from supervisor.devstack.s3 import LocalS3, S3Error, credentials

    if not _BUCKET.fullmatch(bucket):
        raise CliError(
            f"--bucket {bucket!r}: 3-63 lower-case letters, digits, dots and hyphens", EXIT_USAGE
        )
    try:
        access, secret, defaults = credentials()
    except S3Error as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    server = LocalS3(data_dir, bucket, access, secret, port)

    def start() -> None:
        server.start()
        shown = (
            f" AWS_ACCESS_KEY_ID={access} AWS_SECRET_ACCESS_KEY={secret}"
            if defaults
            else " (and your AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"
        )
        click.echo(
            f"S3 (SeaweedFS) ready at {server.endpoint}, bucket {bucket} (data in {data_dir}); "
            f"Ctrl-C stops it\n"
            f"  export SLUICEGATE_S3_ENDPOINT={server.endpoint}{shown}\n"
            f"  sluicegate serve --deep-storage s3://{bucket}/segments"
        )

    _in_foreground(
        "S3", start, server.wait, server.request_stop, server.stop, (S3Error,), str(server.log)
    )


@click.command("registry-local")
@click.option("--port", type=click.IntRange(0, 65535), default=8081, show_default=True)
@click.option(
    "--data-dir",
    "--dir",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/registry"),
    show_default=True,
    help="Its log and scratch files.",
)
def registry_local(port: int, data_dir: Path) -> None:
    """Run a real Confluent-compatible schema registry (Apicurio Registry, installed by `make
    setup`) on 127.0.0.1 until SIGINT/SIGTERM. Schemas are held in memory: they last until it
    stops."""
    from supervisor.devstack.registry import VERSION, LocalRegistry, RegistryError

    server = LocalRegistry(data_dir, port)

    def start() -> None:
        server.start()
        click.echo(
            f"Schema registry (Apicurio {VERSION}) ready at {server.url} (in memory; log in "
            f"{server.log}); Ctrl-C stops it"
        )

    _in_foreground(
        "Schema registry",
        start,
        server.wait,
        server.request_stop,
        server.stop,
        (RegistryError,),
        str(server.log),
    )


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SPARK_SIZE = re.compile(r"[1-9][0-9]{0,6}[kKmMgGtT]")


def _kafka_version() -> str:
    from tasks.jars import KAFKA_VERSION

    return KAFKA_VERSION


@click.command("resolve-jars")
def resolve_jars() -> None:
    """Resolve the Kafka broker's, Kafka's tools', spark-sql-kafka's and Iceberg's Spark jars
    from Maven Central, then archive the Spark driver's classes so drivers start faster
    (idempotent)."""
    from tasks.jars import (
        JarsMissingError,
        iceberg_spark_bundle,
        kafka_broker_bundle,
        kafka_tools_bundle,
        resolve,
        spark_kafka_bundle,
    )

    cache = load_settings().jar_cache
    bundles = (kafka_broker_bundle(), kafka_tools_bundle(), spark_kafka_bundle())
    for bundle in (*bundles, iceberg_spark_bundle()):
        try:
            folder = resolve(bundle, cache)
        except JarsMissingError as exc:
            raise CliError(str(exc).replace("\n", " | "), EXIT_USAGE) from None
        click.echo(f"{bundle.name} {bundle.version}: {folder}")
    _class_archive(cache)


def _class_archive(cache: Path) -> None:
    """Build the driver's class archive; without one, drivers only start slower, so a failed
    build is reported (where its log is) and setup goes on."""
    from tasks.spark import class_archive

    try:
        built = class_archive.build(cache)
    except (RuntimeError, OSError) as exc:
        click.echo(f"JVM class archive not built (drivers start slower): {exc}", err=True)
        return
    if built is None:
        click.echo("JVM class archive not built: no java on PATH or JAVA_HOME", err=True)
        return
    path, seconds = built
    click.echo(f"JVM class archive: {path}" + (f" (built in {seconds:.0f} s)" if seconds else ""))


@click.command("quickstart")
@click.option("--kafka-port", type=int, default=9092, show_default=True)
@click.option("--port", type=int, default=8090, show_default=True, help="The service's port.")
@click.option(
    "--spec",
    "spec_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("examples/wikipedia-supervisor.json"),
    show_default=True,
)
@click.option(
    "--data",
    "data_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("examples/wikipedia-sample.jsonl"),
    show_default=True,
)
@click.option(
    "--var",
    "var_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/quickstart"),
    show_default=True,
)
@click.option("--once", is_flag=True, help="Stop everything once the spec is submitted.")
@click.option(
    "--rate",
    type=click.FloatRange(min=0),
    default=50.0,
    show_default=True,
    help="Wiki edits a second fed to the topic while it runs.",
)
def quickstart(**options: Any) -> None:
    """Start the local broker and the service, load sample edits and stream more, submit the
    example spec, and show live progress until Ctrl-C."""
    from supervisor.devstack import DevstackError
    from supervisor.devstack.quickstart import Quickstart

    try:
        Quickstart(**options, jar_cache=load_settings().jar_cache).run()
    except DevstackError as exc:
        raise CliError(exc.message, EXIT_USAGE if exc.usage else 1) from None
