"""The overlord in a thread of the calling process: the app served by a real uvicorn server
on a free loopback port (the tests' `RunningService`, the live benchmarks' stack, the control
plane benchmark's service)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Executable

from supervisor.app import create_app
from supervisor.db.engine import make_engine
from supervisor.net import free_port
from supervisor.runner.protocol import Runner
from supervisor.settings import Settings
from tasks.serving import ServerThread

BASE = "/druid/indexer/v1/supervisor"  # Druid's supervisor API


class RunningService:
    """The app served by uvicorn in a thread; `runner` replaces the task runner it would
    make. A context manager, or `start` and `stop`."""

    def __init__(
        self,
        settings: Settings,
        port: int | None = None,
        runner: Runner | None = None,
        access_log: bool = True,
    ) -> None:
        self.settings = settings
        self.port = port or free_port()
        # what the service tells tasks and other overlords it is at (its advertised URL)
        settings.port = self.port
        self.url = f"{settings.scheme}://127.0.0.1:{self.port}"
        self.app = create_app(settings)
        if runner is not None:
            self.app.state.context.runner = runner
        self.serving = ServerThread(
            self.app,
            "127.0.0.1",
            self.port,
            settings.tls_cert,
            settings.tls_key,
            access_log=access_log,
        )

    def start(self, timeout: float = 60) -> RunningService:
        self.serving.start(timeout)
        return self

    def stop(self, timeout: float = 120) -> None:
        self.serving.stop(timeout)

    def __enter__(self) -> RunningService:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def rows(self, query: Executable) -> list[Any]:
        """The rows a query reads from the service's metadata DB, on a connection of its own."""
        return db_rows(self, query)


def db_rows(where: RunningService | str, query: Executable) -> list[Any]:
    """Rows straight from a metadata DB (a service's, or at a URL), on a connection of its
    own."""
    url = where if isinstance(where, str) else where.settings.metadata_url
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(query).all())
    finally:
        engine.dispose()


def task_settings(tmp_path: Path, jar_cache: Path, **overrides: Any) -> Settings:
    """A service that runs real task processes (local[1] Spark), its files under tmp_path,
    its metadata DB a SQLite file there unless `metadata_url` says otherwise."""
    values: dict[str, Any] = {
        "metadata_url": f"sqlite:///{tmp_path / 'meta.db'}",
        "deep_storage": tmp_path / "deep",
        "work_dir": tmp_path / "work",
        "jar_cache": jar_cache,
        "task_master": "local[1]",
        **overrides,
    }
    return Settings(**values)


@contextmanager
def overlord_with_tasks(
    tmp_path: Path, jar_cache: Path, task_master: str, **overrides: Any
) -> Iterator[tuple[RunningService, httpx.Client]]:
    """The service running real task processes (and its supervisors), killed on exit unless
    `kill_tasks_on_exit=False` is given."""
    settings = task_settings(
        tmp_path, jar_cache, task_master=task_master, **{"kill_tasks_on_exit": True, **overrides}
    )
    with (
        RunningService(settings) as service,
        httpx.Client(base_url=service.url, timeout=30) as client,
    ):
        yield service, client
