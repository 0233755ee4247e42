"""The FastAPI application: wiring, lifespan (migrations), and error handling."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.staticfiles import StaticFiles

from supervisor import __version__
from supervisor.api import (
    basic_security,
    compaction,
    compaction_supervisors,
    coordinator,
    docs,
    leader,
    retention,
    service,
    sql,
    supervisors,
    tasks,
    workers,
)
from supervisor.api.auth import Authentication
from supervisor.api.context import AppContext
from supervisor.api.documented import documented
from supervisor.api.guard import RequestGuard
from supervisor.api.redirect import FollowerRedirect
from supervisor.clock import Clock, utc_now
from supervisor.db.engine import SessionFactory, make_engine, migrate, session_factory
from supervisor.errors import DomainError
from supervisor.lake.tables import open_lake
from supervisor.leading import LeaderDuties
from supervisor.runner import host_runner
from supervisor.runner.cluster import ClusterRunner
from supervisor.services.authentication import ADMIN, Authenticator, ensure_admin
from supervisor.services.leadership import Leadership, LeaseHeld
from supervisor.services.metrics import Metrics
from supervisor.services.publish import adopt_published
from supervisor.settings import Settings
from tasks.spec.errors import SpecError

log = logging.getLogger(__name__)
CONSOLE = Path(__file__).parent / "console"  # the web console: static files, no build step


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message, **extra})


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SpecError)
    async def spec_error(_: Request, exc: SpecError) -> JSONResponse:
        errors = [{"field": e.field, "reason": e.reason} for e in exc.errors]
        return _error(400, str(exc), errors=errors)

    @app.exception_handler(DomainError)
    async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
        extra = {"field": exc.field} if exc.field else {}
        return _error(exc.status_code, exc.message, **extra)

    @app.exception_handler(RequestValidationError)
    async def request_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = []
        for item in exc.errors():
            field = ".".join(str(part) for part in item["loc"][1:]) or str(item["loc"][0])
            errors.append({"field": field, "reason": str(item["msg"])})
        message = "; ".join(f"{e['field']}: {e['reason']}" for e in errors)
        return _error(400, message, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))


def _start_authentication(context: AppContext, sessions: SessionFactory) -> None:
    """Authentication on: the admin user on a metadata DB with none (its password shown once
    when it was not given), and the authenticator every request goes through."""
    settings = context.settings
    given = settings.admin_password.get_secret_value() if settings.admin_password else None
    generated = ensure_admin(sessions, given, context.clock())
    if generated is not None:
        print(  # once, on the terminal of whoever started it; never in a log file
            f"sluicegate: created user {ADMIN} with password {generated} "
            "(shown once; change it with the basic-security API)",
            file=sys.stderr,
            flush=True,
        )
    context.authenticator = Authenticator(sessions, settings.auth_cache_s)


def _lifespan(
    context: AppContext, leadership: Leadership | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up (migrations, authentication, the lease: leading or following) and shut-down
    (the lease given back; the tasks killed or left to the next overlord)."""
    settings = context.settings

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.prepare_dirs()
        engine = make_engine(settings.metadata_url)
        migrate(engine)
        sessions = context.started_sessions = session_factory(engine)
        log.info("metadata DB ready at %s", engine.url.render_as_string(hide_password=True))
        context.shared = engine.dialect.name != "sqlite"
        context.lake = open_lake(engine, settings.storage())
        adopt_published(sessions, context.lake)  # what a release before Iceberg published
        if settings.auth == "basic":
            _start_authentication(context, sessions)
        held = leadership or Leadership(sessions, settings.advertised_url(), settings.lease_s)
        held.sessions = sessions  # one engine (SQLite: one writer queue)
        duties = LeaderDuties(context, held)
        held.on_elected, held.on_lost = duties.start, duties.stop
        context.leadership = held
        try:
            _lead_or_follow(context, held, duties)
        except BaseException as exc:
            log.error("not starting: %s", exc)
            held.halt()
            duties.stop()
            held.release()
            engine.dispose()
            raise
        try:
            yield
        finally:
            held.halt()  # no election from now on: nothing starts after the stop below
            leading = held.leading
            duties.stop()
            held.release()
            if settings.kill_tasks_on_exit and leading:  # a follower's tasks are the leader's
                context.runner.kill_all()
            elif leading:  # tasks outlive the service; the host's application with none doesn't
                context.runner.release()
            if context.sql_engine is not None:
                context.sql_engine.close()
            engine.dispose()

    return lifespan


def _lead_or_follow(context: AppContext, held: Leadership, duties: LeaderDuties) -> None:
    if held.leading:
        epoch: int | None = held.epoch
    elif context.shared:
        epoch = held.campaign()
    else:
        epoch = held.acquire()
    if epoch is not None:
        duties.start(epoch)
    if not context.shared and not held.leading:  # lost while starting
        raise LeaseHeld("the leader lease was lost while the service started")
    if not held.leading:
        log.info("following: reads are answered here, writes go to the leader")


def _install_middleware(app: FastAPI, context: AppContext) -> None:
    """Outermost last: the request guard, CORS when origins are allowed, authentication, the
    follower's redirect."""
    settings = context.settings
    app.add_middleware(FollowerRedirect, context=context)
    app.add_middleware(Authentication, context=context)
    origins = [origin.strip() for origin in settings.cors_origins.split(",") if origin.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_credentials=True,
            allow_methods=["*"],
            allow_headers=["*"],
        )
    app.add_middleware(RequestGuard, settings=settings)  # outermost: before any work


def create_app(
    settings: Settings | None = None,
    clock: Clock = utc_now,
    leadership: Leadership | None = None,
) -> FastAPI:
    """The service. `leadership`: the leader lease, already taken (by `sluicegate serve` on
    SQLite, so that a refusal is its one-line error); taken or followed at start-up otherwise.

    On SQLite the overlord is the only one: it takes the lease (waiting out one a dead
    overlord left) or refuses to start. On a shared metadata DB (PostgreSQL) it leads if the
    lease is free and follows otherwise, taking over when the leader's lease runs out."""
    settings = settings or Settings()
    local = host_runner(settings)
    context = AppContext(settings, clock, local)
    # tasks go to the task hosts registered in the metadata DB, else run here
    context.runner = ClusterRunner(settings, local, lambda: context.sessions, clock)
    context.metrics = Metrics(context.kafka_access)
    app = FastAPI(
        title="Sluicegate",
        version=__version__,
        description="Kafka topics ingested into Parquet segments exactly once, "
        "driven through Apache Druid's supervisor API.",
        lifespan=_lifespan(context, leadership),
        docs_url=None,  # served by api/docs.py, from the package instead of a CDN
        redoc_url=None,
    )
    app.state.context = context
    app.openapi = lambda: documented(app)  # type: ignore[method-assign]
    _install_error_handlers(app)
    routers = (
        compaction_supervisors,
        supervisors,
        tasks,
        coordinator,
        retention,
        compaction,
        leader,
        basic_security,
        sql,
    )
    for api in (*routers, workers):
        app.include_router(api.router)
    _install_middleware(app, context)
    app.mount("/console", StaticFiles(directory=CONSOLE, html=True), name="console")
    app.mount(docs.ASSETS_PATH, StaticFiles(directory=docs.ASSETS), name="docs-assets")
    app.include_router(docs.router)
    app.include_router(service.router)
    return app
