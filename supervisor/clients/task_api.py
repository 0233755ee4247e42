"""The overlord's client of a task's control API (Druid's chat endpoints), in httpx's terms:
requests and responses are httpx's, and the transport is the seam (tests hand in an
httpx.MockTransport). The default transport keeps HTTP/1.1 connections to the tasks alive
and shares them between threads."""

from __future__ import annotations

import functools
import http.client
import json
import select
import ssl
import threading
from collections.abc import Mapping
from datetime import datetime
from time import monotonic
from typing import Any, Protocol, TypeVar

import httpx
from pydantic import TypeAdapter, ValidationError

from supervisor.clients.held import HeldRows
from supervisor.lru import Lru
from supervisor.model.fence import Leader
from tasks.protocol import EPOCH_HEADER, LEADER_HEADER, TOKEN_HEADER, TaskMetrics, TaskStatusCode

# An idle connection is closed after this: under the 5 s keep-alive of the tasks' servers
# (uvicorn's default), so no request is sent on a connection the task is closing.
IDLE_S = 4.0
MAX_IDLE_PER_TASK = 4
MAX_IDLE = 256  # idle connections kept in all


class TaskApiError(Exception):
    def __init__(self, status_code: int | None, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


def _stale(connection: http.client.HTTPConnection) -> bool:
    """An idle keep-alive connection the task closed (or wrote to unasked) is readable."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class _Connections:
    """Keep-alive HTTP/1.1 connections to tasks, shared by every thread: each request takes an
    idle connection to its task (or opens one) and gives it back when the answer is read.

    The passes ask every running task for its offsets and counters; httpx's own client and
    connection pool spent ~1.5 ms of CPU (and GIL) per request in their layers, which with a
    thousand supervisors was the largest share of the passes' CPU. http.client is a thin
    layer over the socket."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[tuple[str, str, int], list[tuple[http.client.HTTPConnection, float]]] = {}
        self.count = 0  # idle connections in all
        self.swept = monotonic()

    def _take(self, address: tuple[str, str, int], timeout: float) -> http.client.HTTPConnection:
        now = monotonic()
        while True:
            with self.lock:
                stack = self.idle.get(address)
                entry = stack.pop() if stack else None
                self.count -= entry is not None
            if entry is None:
                scheme, host, port = address
                if scheme == "https":  # verified: the system's CAs, or SSL_CERT_FILE's
                    return http.client.HTTPSConnection(
                        host, port, timeout=timeout, context=_tls_context()
                    )
                return http.client.HTTPConnection(host, port, timeout=timeout)
            connection, since = entry
            if now - since < IDLE_S and not _stale(connection):
                if connection.sock is not None:
                    connection.sock.settimeout(timeout)
                return connection
            connection.close()

    def _give(self, address: tuple[str, str, int], connection: http.client.HTTPConnection) -> None:
        now = monotonic()
        expired = []
        with self.lock:
            if now - self.swept >= IDLE_S:  # connections to tasks not asked again (ended ones)
                self.swept = now
                for key in list(self.idle):
                    kept = [e for e in self.idle[key] if now - e[1] < IDLE_S]
                    expired += [e[0] for e in self.idle[key] if now - e[1] >= IDLE_S]
                    if kept:
                        self.idle[key] = kept
                    else:
                        del self.idle[key]
                self.count -= len(expired)
            stack = self.idle.setdefault(address, [])
            pooled = len(stack) < MAX_IDLE_PER_TASK and self.count < MAX_IDLE
            if pooled:
                stack.append((connection, now))
                self.count += 1
        for old in expired:
            old.close()
        if not pooled:
            connection.close()

    def request(
        self,
        address: tuple[str, str, int],
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout: float,
    ) -> tuple[int, bytes]:
        connection = self._take(address, timeout)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            content = response.read()
        except BaseException:
            connection.close()
            raise
        if response.will_close:
            connection.close()
        else:
            self._give(address, connection)
        return response.status, content


_connections = _Connections()


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The context of connections to tasks serving TLS: the default one (hostname checked,
    the system's CAs or SSL_CERT_FILE's), built once."""
    return ssl.create_default_context()


class PooledTransport(httpx.BaseTransport):
    """httpx's transport over the shared keep-alive connections (`_connections`). The
    request's `timeout` extension (httpx's) bounds each socket operation."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        timeout = request.extensions.get("timeout", {}).get("read") or 10.0
        headers = {key: value for key, value in request.headers.items() if key != "host"}
        body = request.read() or None
        try:
            status, content = _connections.request(
                (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80)),
                request.method,
                url.raw_path.decode("ascii"),
                headers,
                body,
                timeout,
            )
        except (OSError, http.client.HTTPException) as exc:
            raise httpx.ConnectError(f"task unreachable: {type(exc).__name__}") from exc
        return httpx.Response(status, content=content, request=request)


class LocatedTask(Protocol):
    """What the client reads of a task's record (supervisor/db/models.py TaskRow)."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def location_host(self) -> str | None: ...
    @property
    def location_port(self) -> int | None: ...
    @property
    def location_scheme(self) -> str | None: ...
    @property
    def token(self) -> str | None: ...


POOLED = PooledTransport()


def reachable(row: LocatedTask) -> bool:
    """A running task with a location and a token: its control API can be asked."""
    return (
        row.status == TaskStatusCode.RUNNING
        and row.location_port is not None
        and row.token is not None
    )


class TaskClient(Protocol):
    """What the overlord asks of a task's control API (Druid's chat endpoints): TaskApiClient,
    and the fakes of tests. Every call raises TaskApiError when the task does not answer, or
    answers an error or what the protocol does not allow."""

    def status(self) -> str: ...

    def pause(self) -> dict[str, int] | None:
        """The task's current offsets once it is paused; None while it is pausing (202)."""
        ...

    def resume(self) -> None: ...

    def current_offsets(self) -> dict[str, int]: ...

    def end_offsets(self) -> dict[str, int]: ...

    def set_end_offsets(self, offsets: Mapping[str, int], finish: bool) -> None:
        """Druid's POST offsets/end: the final end (finish) or a sequence's end; resumes."""
        ...

    def checkpoints(self) -> dict[str, dict[str, int]]:
        """Each sequence's start offsets, by sequence number."""
        ...


class TaskApiClient:
    """A task's control API, at /druid/worker/v1/chat/{task id}, with its token."""

    def __init__(
        self,
        host: str,
        port: int,
        task_id: str,
        token: str,
        timeout: float = 10.0,
        transport: httpx.BaseTransport = POOLED,
        leader: Leader | None = None,
        scheme: str = "http",
    ) -> None:
        self.base = f"{scheme}://{host}:{port}/druid/worker/v1/chat/{task_id}"
        headers = {TOKEN_HEADER: token}
        if leader is not None:  # the task refuses commands of older epochs, publishes here
            headers[EPOCH_HEADER] = str(leader.epoch)
            headers[LEADER_HEADER] = leader.url
        self.headers = httpx.Headers(headers)
        self.timeouts = {"timeout": dict.fromkeys(("connect", "read", "write", "pool"), timeout)}
        self.transport = transport

    @classmethod
    def for_task(
        cls,
        row: LocatedTask,
        timeout: float = 10.0,
        transport: httpx.BaseTransport = POOLED,
        leader: Leader | None = None,
    ) -> TaskApiClient:
        """The client of a recorded task, at its location and with its token; `leader`: the
        leader the calls come from (None: the calls of a read-only route)."""
        return cls(
            row.location_host or "127.0.0.1",
            row.location_port or 0,
            row.id,
            row.token or "",
            timeout,
            transport,
            leader,
            row.location_scheme or "http",
        )

    # ---- the endpoints ------------------------------------------------------------------

    def status(self) -> str:
        return _answer(self._get("/status"), _TEXT)

    def pause(self) -> dict[str, int] | None:
        response = self._call("POST", "/pause")
        if response.status_code == 202:
            return None
        return _answer(response.content, _OFFSETS)

    def resume(self) -> None:
        self._call("POST", "/resume")

    def current_offsets(self) -> dict[str, int]:
        return _answer(self._get("/offsets/current"), _OFFSETS)

    def end_offsets(self) -> dict[str, int]:
        return _answer(self._get("/offsets/end"), _OFFSETS)

    def set_end_offsets(self, offsets: Mapping[str, int], finish: bool) -> None:
        params = {"finish": str(finish).lower()}
        self._call("POST", "/offsets/end", params=params, json=dict(offsets))

    def checkpoints(self) -> dict[str, dict[str, int]]:
        return _answer(self._get("/checkpoints"), _CHECKPOINTS)

    def start_time(self) -> datetime | None:
        """When the task began reading (its time/start); None before it did."""
        since = _answer(self._get("/time/start"), _OPTIONAL_TEXT)
        return None if since is None else datetime.fromisoformat(since.replace("Z", "+00:00"))

    def metrics(self) -> TaskMetrics:
        return _answer(self._get("/metrics"), _METRICS)

    def row_stats(self) -> dict[str, dict[str, Any]]:
        """Druid's rowStats: `totals.buildSegments` (the task's row counts) and
        `movingAverages.buildSegments` (their rates a second over 1m, 5m and 15m)."""
        return _answer(self._get("/rowStats"), _ROW_STATS)

    def unparseable_events(self) -> list[dict[str, object]]:
        """The sampled unparseable records (unparseableEvents' buildSegments)."""
        return _answer(self._get("/unparseableEvents"), _EVENTS)["buildSegments"]

    def held_rows(self, since: Mapping[str, int]) -> HeldRows:
        """The files of the rows the task holds past the committed offsets `since`, and the
        offsets they cover (a 409 TaskApiError: a publish moved past `since`)."""
        held = self._call("GET", "/rows/held", params={"since": json.dumps(dict(since))})
        return _answer(held.content, _HELD)

    def held_file(self, path: str) -> bytes:
        """A file `held_rows` named, as an Arrow IPC stream (a 409: published since)."""
        return self._call("GET", "/rows/held/file", params={"path": path}).content

    # ---- HTTP ---------------------------------------------------------------------------

    def _get(self, path: str) -> bytes:
        return self._call("GET", path).content

    def _call(
        self, method: str, path: str, *, params: dict[str, str] | None = None, json: object = None
    ) -> httpx.Response:
        request = httpx.Request(
            method,
            _url(self.base + path),
            params=params,
            json=json,
            headers=self.headers,
            extensions=self.timeouts,
        )
        try:
            response = self.transport.handle_request(request)
            response.read()
        except httpx.TransportError as exc:
            raise TaskApiError(None, str(exc) or type(exc).__name__) from None
        if response.status_code >= 400:
            raise TaskApiError(response.status_code, _error_message(response))
        return response


# under 1 KiB each: every running task's few probed endpoints, kept while in use rather than
# until 4,096 are. A task's endpoints are asked for no more once it ends: with tasks of 30 s
# the soak's overlord filled the cache with ended tasks' for its first half hour (~3 MB of the
# ~19 it grew after its first ten minutes)
_URLS: Lru[str, httpx.URL] = Lru(4096, name="task endpoints", max_idle_s=120.0)


def _url(text: str) -> httpx.URL:
    """A parsed URL, kept: httpx parses each URL it is given (~12 µs), and the passes ask the
    same endpoints of every running task each period."""
    url = _URLS.get(text)
    if url is None:
        url = httpx.URL(text)
        _URLS.put(text, url)
    return url


_HELD: TypeAdapter[HeldRows] = TypeAdapter(HeldRows)
_TEXT: TypeAdapter[str] = TypeAdapter(str)
_METRICS: TypeAdapter[TaskMetrics] = TypeAdapter(TaskMetrics)
_OFFSETS: TypeAdapter[dict[str, int]] = TypeAdapter(dict[str, int])
_CHECKPOINTS: TypeAdapter[dict[str, dict[str, int]]] = TypeAdapter(dict[str, dict[str, int]])
_OPTIONAL_TEXT: TypeAdapter[str | None] = TypeAdapter(str | None)
_ROW_STATS: TypeAdapter[dict[str, dict[str, dict[str, Any]]]] = TypeAdapter(
    dict[str, dict[str, dict[str, Any]]]
)
_EVENTS: TypeAdapter[dict[str, list[dict[str, object]]]] = TypeAdapter(
    dict[str, list[dict[str, object]]]
)
T = TypeVar("T")


def _answer(content: bytes, adapter: TypeAdapter[T]) -> T:
    """A task's JSON answer in the shape the protocol gives it; TaskApiError otherwise."""
    try:
        return adapter.validate_json(content)
    except ValidationError as exc:
        message = f"the task answered what the protocol does not allow: {exc}"
        raise TaskApiError(None, message) from None


def _error_message(response: httpx.Response) -> str:
    if not response.content:
        return ""
    try:
        answer = response.json()
    except ValueError:
        return response.content.decode("utf-8", "replace")
    return str(answer.get("error", answer) if isinstance(answer, dict) else answer)
