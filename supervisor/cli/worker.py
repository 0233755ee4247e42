"""`sluicegate worker`: a task host (Druid's MiddleManager). It serves its API, registers with
the overlords, heartbeats, and runs the tasks the leader assigns it until SIGINT/SIGTERM; its
tasks keep running when it stops (a restarted worker adopts them)."""

from __future__ import annotations

import logging
import os
import signal
import socket
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import click

from supervisor.cli.client import (
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    CliError,
    ServiceClient,
    ServiceError,
    credentials,
)

if TYPE_CHECKING:  # the CLI starts fast: what a worker needs is imported when it runs
    from supervisor.settings import Settings
    from supervisor.worker.agent import Send, WorkerAgent
    from tasks.serving import ServerThread

DEFAULT_PORT = 8091  # Druid's MiddleManager port


@click.command("worker")
@click.option(
    "--overlord",
    envvar="SLUICEGATE_URL",
    required=True,
    help="An overlord's URL, or several comma-separated (or SLUICEGATE_URL): heartbeats go to "
    "the first that takes them, so a host given both overlords of a pair goes on while either "
    "is down; a follower records them in the shared metadata DB as the leader would.",
)
@click.option(
    "--capacity",
    type=click.IntRange(1, 1024),
    default=max(1, (os.cpu_count() or 2) - 1),
    show_default="CPUs - 1, as Druid",
    help="Tasks this host runs at once.",
)
@click.option(
    "--master",
    envvar="SLUICEGATE_TASK_MASTER",
    default="local[*]",
    show_default=True,
    help="Spark master of its tasks: local[N] or spark://HOST:PORT (or SLUICEGATE_TASK_MASTER).",
)
@click.option(
    "--task-runtime",
    envvar="SLUICEGATE_TASK_RUNTIME",
    type=click.Choice(["shared", "process"]),
    default="shared",
    show_default=True,
    help="Its tasks as threads of one long-lived Spark application (shared), or a Spark "
    "driver process each (process) (or SLUICEGATE_TASK_RUNTIME).",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/worker"),
    show_default=True,
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Its address: its API and its tasks' chat API listen here, the overlord calls it here.",
)
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--user",
    "-u",
    envvar="SLUICEGATE_USER",
    help="Log in to the overlord as this user (STATE WRITE), password from SLUICEGATE_PASSWORD; "
    "or SLUICEGATE_TOKEN.",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve its API and its tasks' chat API over HTTPS with this certificate (PEM).",
)
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def worker(
    overlord: str,
    capacity: int,
    master: str,
    task_runtime: str,
    work_dir: Path,
    host: str,
    port: int,
    user: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
) -> None:
    """Run a task host: tasks the leader overlord assigns run here as Spark drivers."""
    from supervisor.cli.common import load_settings
    from supervisor.worker.agent import Identity, WorkerAgent, any_of
    from supervisor.worker.api import create_worker_app
    from tasks.logs import configure_logging
    from tasks.serving import ServerThread

    urls = _checked(overlord, tls_cert, tls_key, master, host, port)
    settings = load_settings(
        work_dir=work_dir,
        task_master=master,
        task_runtime=task_runtime,
        overlord_url=urls[0],
        tls_cert=tls_cert,
        tls_key=tls_key,
    )
    settings.work_dir.mkdir(parents=True, exist_ok=True)
    configure_logging(settings.log_level, settings.log_format)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per heartbeat otherwise
    identity = Identity(host, port, settings.scheme, capacity, _version())
    clients = [ServiceClient(url, timeout=10, auth=credentials(user)) for url in urls]
    agent = WorkerAgent(identity, settings, any_of([_sender(c) for c in clients]))
    api = create_worker_app(agent)
    server = ServerThread(api, host, port, tls_cert, tls_key, "worker-api", log_config=None)
    try:
        stopped = _serve(server, agent, settings, f"with {overlord}")
    finally:
        for client in clients:
            client.close()
    if stopped:
        click.echo("task host stopped (its tasks go on)")


def _checked(
    overlord: str, tls_cert: Path | None, tls_key: Path | None, master: str, host: str, port: int
) -> list[str]:
    """The overlords' URLs, once every option is found good (a one-line error otherwise)."""
    urls = [url.strip() for url in overlord.split(",") if url.strip()]
    for url in urls or [overlord]:
        if urlparse(url).scheme not in ("http", "https") or not urlparse(url).netloc:
            raise CliError(f"--overlord {url!r}: an http:// or https:// URL", EXIT_USAGE)
    if (tls_cert is None) != (tls_key is None):
        raise CliError("--tls-cert and --tls-key: give both or neither", EXIT_USAGE)
    _check_master(master)
    _check_port(host, port)
    return urls


def _sender(client: ServiceClient) -> Send:
    from supervisor.worker.agent import REGISTER, HeartbeatRefused

    def send(heartbeat: dict[str, Any]) -> Any:
        try:
            return client.post(REGISTER, heartbeat)
        except ServiceError as exc:
            raise HeartbeatRefused(exc.message, exc.status_code) from None

    return send


def _serve(server: ServerThread, agent: WorkerAgent, settings: Settings, whom: str) -> bool:
    """Serve the host's API, register and heartbeat until SIGINT or SIGTERM (True) or the
    server ends (False)."""
    identity = agent.identity
    stopping: list[int] = []

    def _stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        server.request_stop()

    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server.start()
        except RuntimeError:
            raise CliError(f"the task host's API did not start on {identity.name}", 1) from None
        _register(agent, settings)
        agent.start()
        click.echo(
            f"task host {identity.name} registered {whom} (capacity {identity.capacity}, "
            f"Spark {settings.task_master}, deep storage {settings.storage().location}); "
            "Ctrl-C stops it, its tasks keep running"
        )
        while server.thread.is_alive() and not stopping:
            server.thread.join(0.5)
    finally:
        server.stop()
        agent.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return bool(stopping)


def _register(agent: WorkerAgent, settings: Settings) -> None:
    from supervisor.worker.agent import HeartbeatRefused
    from tasks.storage import StorageError

    try:
        agent.register()
    except HeartbeatRefused as exc:
        code = EXIT_UNREACHABLE if exc.status_code is None else 1
        raise CliError(f"cannot register with the overlord: {exc.message}", code) from None
    try:
        settings.storage().check()
    except StorageError as exc:
        raise CliError(f"the overlord's {exc}", 1) from None


def _check_master(master: str) -> None:
    """A spark:// master must answer before tasks are taken: a one-line error otherwise."""
    if not master.startswith("spark://"):
        if master.startswith("local"):
            return
        raise CliError(f"--master {master!r}: local[N] or spark://HOST:PORT", EXIT_USAGE)
    parsed = urlparse(master)
    if parsed.hostname is None or parsed.port is None:
        raise CliError(f"--master {master!r}: spark://HOST:PORT", EXIT_USAGE)
    try:
        with socket.create_connection((parsed.hostname, parsed.port), timeout=5):
            pass
    except OSError as exc:
        raise CliError(
            f"the Spark master {master} does not answer ({exc.strerror or exc})", EXIT_UNREACHABLE
        ) from None


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", 1) from None


def _version() -> str:
    from importlib.metadata import version

    try:
        return f"sluicegate {version('sluicegate')}"
    except Exception:  # not installed as a package: a checkout on the path
        return "sluicegate"
