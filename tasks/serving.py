"""An ASGI app served by uvicorn in a daemon thread of the calling process, so that thread can
go on with other work (a task's Spark, a task host's heartbeats, a test): the chat API of a
task process and of a shared application, a task host's API, the overlord in a test."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import uvicorn


class ServerThread:
    def __init__(
        self,
        app: Any,
        host: str,
        port: int,
        tls_cert: Path | str | None = None,
        tls_key: Path | str | None = None,
        name: str = "uvicorn",
        **config: Any,
    ) -> None:
        """`config`: more of uvicorn.Config's settings (log_level is warning unless given)."""
        settings = {"log_level": "warning", **config}
        self.where = f"{host}:{port}"
        self.server = uvicorn.Server(
            uvicorn.Config(
                app, host=host, port=port, ssl_certfile=tls_cert, ssl_keyfile=tls_key, **settings
            )
        )
        self.thread = threading.Thread(target=self.server.run, name=name, daemon=True)

    def start(self, timeout: float = 30.0) -> None:
        """Serve, once the server listens; RuntimeError when it did not within `timeout`."""
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.thread.name} did not start on {self.where}")
            time.sleep(0.02)

    def request_stop(self) -> None:
        """Ask it to stop (safe from a signal handler: it does not wait)."""
        self.server.should_exit = True

    def stop(self, timeout: float = 10.0) -> None:
        self.request_stop()
        self.thread.join(timeout)
