"""The REST load of bench/control_plane.py, run in a process of its own so that its CPU is
not the service's. Two modes, parameters as JSON on stdin, the result as JSON on stdout:

- `rest URL`: {"rps", "seconds", "plan"}: requests of the MIX at a fixed rate (open loop: each
  is sent at its scheduled time whatever the earlier ones are doing), each one's latency
  measured from its scheduled start, so a stalled service is not hidden by a waiting client.
- `burst URL`: {"requests": [[method, path, body], ...], "width"}: all of them, `width` at a
  time; when the first was sent and the last answered.
- `serial URL`: {"requests": [...]}: one at a time on one connection (the caller measures the
  service's CPU per request); each one's latency and the count of errors.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from typing import Any
from urllib.parse import urlsplit

BASE = "/druid/indexer/v1/supervisor"
TASKS = "/druid/indexer/v1"
TIMEOUT_S = 120.0  # a request unanswered this long counts as an error
# kind -> weight (percent). The writes: an unchanged spec resubmitted with
# skipRestartIfUnmodified (validated and compared, nothing written), and suspend/resume of a
# set of supervisors kept apart for it (each writes a spec version and rolls tasks over).
MIX = {
    "GET supervisor/{id}/status": 30,
    "GET supervisor/{id}": 10,
    "GET supervisor (ids)": 5,
    "GET supervisor?state=true": 2,
    "GET supervisor/{id}/health": 5,
    "GET tasks?state=running&datasource": 15,
    "GET task/{id}/status": 13,
    "POST supervisor (unchanged spec)": 10,
    "POST supervisor/{id}/suspend|resume": 10,
}


class Requests:
    """The request of each kind, drawn from the plan: which supervisors and tasks exist,
    which supervisors are toggled and which get their spec resubmitted."""

    def __init__(self, plan: dict[str, Any], rng: random.Random) -> None:
        self.plan, self.rng = plan, rng
        self.toggled = 0
        self.suspended: set[str] = set()

    def make(self, kind: str) -> tuple[str, str, Any]:
        plan, rng = self.plan, self.rng
        sid = rng.choice(plan["ids"])
        simple = {
            "GET supervisor/{id}/status": f"{BASE}/{sid}/status",
            "GET supervisor/{id}": f"{BASE}/{sid}",
            "GET supervisor (ids)": BASE,
            "GET supervisor?state=true": f"{BASE}?state=true",
            "GET supervisor/{id}/health": f"{BASE}/{sid}/health",
            "GET tasks?state=running&datasource": f"{TASKS}/tasks?state=running&datasource={sid}",
        }
        if kind in simple:
            return "GET", simple[kind], None
        if kind == "GET task/{id}/status":
            return "GET", f"{TASKS}/task/{rng.choice(plan['task_ids'])}/status", None
        if kind == "POST supervisor (unchanged spec)":
            index = rng.choice(plan["resubmit"])
            return "POST", f"{BASE}?skipRestartIfUnmodified=true", plan["specs"][str(index)]
        target = plan["toggle"][self.toggled % len(plan["toggle"])]
        self.toggled += 1
        verb = "resume" if target in self.suspended else "suspend"
        self.suspended ^= {target}
        return "POST", f"{BASE}/{target}/{verb}", None


class Http:
    """A minimal HTTP/1.1 client over asyncio streams with keep-alive connections, opening a
    new one whenever every open one is busy (so nothing queues on the client's side). httpx's
    async pool spends more CPU per request than the service at a few hundred a second."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        self.headers = headers or {}  # sent with every request (credentials)
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", int(parts.port or 80)
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.opened = 0

    async def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """(status, body) of one request."""
        if self.idle:
            reader, writer = self.idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            self.opened += 1
        data = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\nhost: {self.host}\r\ncontent-length: {len(data)}\r\n"
        if data:
            head += "content-type: application/json\r\n"
        sent = {**self.headers, **(headers or {})}
        head += "".join(f"{name}: {value}\r\n" for name, value in sent.items())
        writer.write(head.encode() + b"\r\n" + data)
        status = int((await reader.readline()).split()[1])
        length, close = 0, False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and value.strip().lower() == "close":
                close = True
        answer = await reader.readexactly(length)
        if close:
            writer.close()
        else:
            self.idle.append((reader, writer))
        return status, answer

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()


async def rest(
    url: str, rps: float, seconds: float, plan: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    rng = random.Random(7)  # the same requests in the same order on every run
    requests = Requests(plan, rng)
    kinds = rng.choices(list(MIX), weights=list(MIX.values()), k=int(rps * seconds))
    samples: list[tuple[str, float, int]] = []
    late: list[float] = []
    http = Http(url, headers)

    async def one(kind: str, method: str, path: str, body: Any, at: float) -> None:
        late.append(time.perf_counter() - at)
        try:
            status, _ = await asyncio.wait_for(http.request(method, path, body), TIMEOUT_S)
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):  # and timeouts
            status = 0
        samples.append((kind, time.perf_counter() - at, status))

    began = time.perf_counter() + 0.2
    running = []
    for number, kind in enumerate(kinds):
        at = began + number / rps
        method, path, body = requests.make(kind)
        await asyncio.sleep(max(0.0, at - time.perf_counter()))
        running.append(asyncio.create_task(one(kind, method, path, body, at)))
    await asyncio.gather(*running)
    took = time.perf_counter() - began
    http.close()
    return {
        "samples": samples,
        "late_s": late,
        "seconds": took,
        "connections": http.opened,
    }


async def burst(
    url: str, requests: list[list[Any]], width: int, headers: dict[str, str]
) -> dict[str, Any]:
    gate = asyncio.Semaphore(width)
    codes: list[int] = []
    http = Http(url, headers)

    async def one(method: str, path: str, body: Any) -> None:
        async with gate:
            codes.append((await http.request(method, path, body))[0])

    began = time.time()
    await asyncio.gather(*(one(*request) for request in requests))
    http.close()
    return {"began": began, "ended": time.time(), "errors": sum(c >= 400 for c in codes)}


async def serial(url: str, requests: list[list[Any]], headers: dict[str, str]) -> dict[str, Any]:
    http = Http(url, headers)
    latencies: list[float] = []
    errors = 0
    for method, path, body in requests:
        began = time.perf_counter()
        status, _ = await http.request(method, path, body)
        latencies.append(time.perf_counter() - began)
        errors += status >= 400
    http.close()
    return {"latencies": latencies, "errors": errors}


def main() -> None:
    mode, url = sys.argv[1], sys.argv[2]
    params = json.load(sys.stdin)
    headers = params.get("headers", {})
    if mode == "rest":
        result = asyncio.run(rest(url, params["rps"], params["seconds"], params["plan"], headers))
    elif mode == "serial":
        result = asyncio.run(serial(url, params["requests"], headers))
    else:
        result = asyncio.run(burst(url, params["requests"], params["width"], headers))
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
