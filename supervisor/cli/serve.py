"""`sluicegate serve`: the service, its checks before it starts (deep storage, authentication
off beyond loopback), and its leader lease taken at once on SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from supervisor.cli.client import EXIT_USAGE, CliError
from supervisor.cli.common import load_settings
from supervisor.settings import Settings

if TYPE_CHECKING:
    from supervisor.services.leadership import Leadership


@click.command("serve")
@click.option("--host", help="Interface to listen on [SLUICEGATE_HOST, default 127.0.0.1].")
@click.option("--port", type=int, help="Port [SLUICEGATE_PORT, default 8090].")
@click.option("--metadata-url", help="SQLAlchemy URL of the metadata DB [SLUICEGATE_METADATA_URL].")
@click.option(
    "--deep-storage",
    help="Where segments go: a directory, or s3://bucket/prefix (endpoint from "
    "SLUICEGATE_S3_ENDPOINT, credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) "
    "[SLUICEGATE_DEEP_STORAGE, default ./var/segments].",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Task work directory [SLUICEGATE_WORK_DIR].",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    help="Log lines as text or JSON objects [SLUICEGATE_LOG_FORMAT, default text].",
)
@click.option(
    "--task-master",
    help="Spark master of the tasks run here: local[N] or spark://HOST:PORT "
    "[SLUICEGATE_TASK_MASTER, default local[*]].",
)
@click.option(
    "--task-runtime",
    type=click.Choice(["shared", "process"]),
    help="Tasks as threads of one long-lived Spark application per host (shared), or a Spark "
    "driver process each (process) [SLUICEGATE_TASK_RUNTIME, default shared].",
)
@click.option(
    "--auth",
    type=click.Choice(["none", "basic"]),
    help="Authentication [SLUICEGATE_AUTH, default none: loopback only].",
)
@click.option(
    "--allow-unauthenticated",
    is_flag=True,
    default=None,
    help="Serve a non-loopback address with authentication off [SLUICEGATE_ALLOW_UNAUTHENTICATED].",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Serve HTTPS with this certificate chain, PEM [SLUICEGATE_TLS_CERT].",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The certificate's private key, PEM [SLUICEGATE_TLS_KEY].",
)
def serve(**options: Any) -> None:
    """Run the service: migrate the metadata DB, then serve the API."""
    from supervisor import allocator, heap

    overrides = {key: value for key, value in options.items() if value is not None}
    settings = load_settings(**overrides)
    # may start this process again: before the imports below, which it would do twice
    allocator.python_allocator(settings.python_allocator)

    import uvicorn

    from supervisor.app import create_app
    from tasks.logs import configure_logging
    from tasks.serving import LIMITS

    heap.native(settings.malloc_arenas, settings.malloc_trim_s)  # before any thread starts
    refusal = unauthenticated_refusal(settings)
    if refusal:
        raise CliError(refusal, EXIT_USAGE)
    check_storage(settings)
    configure_logging(settings.log_level, settings.log_format)
    app = create_app(settings, leadership=_lead(settings))
    heap.settle(settings.gc_young_threshold)
    if settings.trace_allocations_s:
        heap.trace_allocations(settings.trace_allocations_s)
    if settings.memory_report_s:
        owners_of = [name.strip() for name in settings.memory_owners_of.split(",")]
        heap.report_every(
            settings.memory_report_s,
            owners_every=settings.memory_owners_every,
            owners_of=[name for name in owners_of if name],
        )
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
        **LIMITS,
    )


def check_storage(settings: Settings) -> None:
    """Deep storage usable before anything starts: a one-line error otherwise."""
    from tasks.storage import StorageError

    try:
        settings.storage().check()
    except StorageError as exc:
        raise CliError(str(exc), 1) from None


def unauthenticated_refusal(settings: Settings) -> str | None:
    """Why the service must not start: anyone who reaches a non-loopback address could do
    anything with authentication off."""
    if settings.auth != "none" or settings.allow_unauthenticated or is_loopback(settings.host):
        return None
    return (
        f"refusing to serve {settings.host} with authentication off: anyone who reaches it "
        "could change or stop every supervisor; use --auth basic, or --allow-unauthenticated"
    )


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _lead(settings: Settings) -> Leadership | None:
    """On SQLite, take the metadata DB's leader lease before serving: another overlord's is a
    one-line error (the service's start-up would end in a traceback). On a shared metadata DB
    the service leads or follows, so there is nothing to refuse: None."""
    from supervisor.db.engine import make_engine, migrate, session_factory
    from supervisor.services.leadership import Leadership, LeaseHeld

    settings.prepare_dirs()
    engine = make_engine(settings.metadata_url)
    if engine.dialect.name != "sqlite":
        engine.dispose()
        return None
    migrate(engine)
    leadership = Leadership(session_factory(engine), settings.advertised_url(), settings.lease_s)
    try:
        leadership.acquire()
    except LeaseHeld as exc:
        raise CliError(str(exc), 1) from None
    finally:
        engine.dispose()  # the service's own engine takes over the renewals
    return leadership
