"""An ASGI app served by uvicorn in a daemon thread of the calling process, so that thread can
go on with other work (a task's Spark, a task host's heartbeats, a test): the chat API of a
task process and of a shared application, a task host's API, the overlord in a test.

Every server of the project (these and `sluicegate serve`) speaks HTTP through `BoundedHttp`:
uvicorn's own protocol waits for ever on a connection that sends nothing or half a request,
and takes request heads of any size."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEAD_TIMEOUT_S = 10.0  # a request's head (line and headers) arrives within this, from its start
BODY_IDLE_S = 10.0  # and its body never stalls for longer
MAX_HEAD_BYTES = 8192  # Druid's (Jetty's) maxRequestHeaderSize
MAX_CONNECTIONS = 2048  # open connections and requests at once; more are answered 503


class BoundedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol with limits: a connection closes when a request's head
    has not arrived HEAD_TIMEOUT_S after the connection or the request began (an idle
    connection between requests is uvicorn's keep-alive timeout, 5 s), or when its body stalls
    BODY_IDLE_S; a head over MAX_HEAD_BYTES is answered 431 and the connection closed."""

    _timer: asyncio.TimerHandle | None = None
    _head_bytes = 0
    _refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(HEAD_TIMEOUT_S)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._arm(HEAD_TIMEOUT_S)

    def on_url(self, url: bytes) -> None:
        if self._counted(len(url)):
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._counted(len(name) + len(value) + 4):
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        self._arm(BODY_IDLE_S)  # (a request without a body completes at once: disarmed below)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            self._arm(BODY_IDLE_S)
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            self._disarm()
            super().on_message_complete()

    def _counted(self, size: int) -> bool:
        """Whether the head may grow by `size` bytes; else 431 and the connection closed."""
        if self._refused:
            return False
        self._head_bytes += size
        if self._head_bytes <= MAX_HEAD_BYTES:
            return True
        self._refused = True
        self._disarm()
        text = f"the request's head is larger than {MAX_HEAD_BYTES} bytes".encode()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; "
            b"charset=utf-8\r\nconnection: close\r\ncontent-length: "
            + str(len(text)).encode()
            + b"\r\n\r\n"
            + text
        )
        self.transport.close()
        return False

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._timed_out)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self.flow is not None and self.flow.read_paused:  # the app is the slow one
            self._arm(BODY_IDLE_S)
            return
        if not self.transport.is_closing():
            self.transport.close()  # a request under way sees its client gone


# TLS 1.2's forward-secret AEAD suites only, as Mozilla's "intermediate" configuration has them
# (Python's default also takes CBC ones); TLS 1.3's are all of that kind, and older versions
# are refused by Python's default minimum
TLS_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20:!aNULL:!eNULL"
# uvicorn.Config's settings for every server of the project
LIMITS: dict[str, Any] = {
    "http": BoundedHttp,
    "limit_concurrency": MAX_CONNECTIONS,
    "ssl_ciphers": TLS_CIPHERS,
}


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
        settings = {"log_level": "warning", **LIMITS, **config}
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
