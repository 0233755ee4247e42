"""Simulated tasks for bench/control_plane.py: one asyncio HTTP server, in a process of its
own (so its CPU is not the service's), answers the control API of every simulated task on one
port the way tasks/runtime/control.py does. A task reads at once; its offsets follow the simulated
stream (the same formula as bench/simulated.py); pause returns the current offsets; end
offsets with finish=true make it "build" for `--publish-delay` seconds, publish one segment
through the service's real publish endpoint (retrying while its predecessor publishes), and
exit. A request for a task that has ended has its connection dropped, like a dead process.

The service's SimulatedRunner drives it through /sim/... endpoints: batch (launches and kills,
in order), exited; the benchmark reads /sim/stats (task states, control API calls by path, the
service's answers to publishes) and /sim/wave (when each group paused, rolled, had a successor
reading, and its rolled task ended).

    .venv/bin/python bench/simulated_tasks.py --port 9100 --overlord http://127.0.0.1:8090
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.rest_load import Http  # noqa: E402
from tasks.protocol import END_OF_PARTITION, TOKEN_HEADER  # noqa: E402

CHAT = "/druid/worker/v1/chat/"
ACTION = "/druid/indexer/v1/action"


def latest_offset(epoch: float, rate: float, now: float) -> int:
    """The simulated latest offset of every partition at wall time `now` (the service's
    SimulatedStream, bench/simulated.py, says the same)."""
    return max(0, int((now - epoch) * rate))


def _iso(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment)) + ".000Z"


@dataclass
class SimTask:
    id: str
    supervisor: str
    datasource: str
    stream: str
    token: str
    start: dict[str, int]
    launched: float
    status: str = "READING"
    frozen: dict[str, int] | None = None  # the offsets it paused at
    end: dict[str, int] | None = None
    paused_at: float | None = None  # first pause
    rolled_at: float | None = None  # final end offsets set
    ended_at: float | None = None
    outcome: str = ""


@dataclass
class Requests:
    by_path: dict[str, int] = field(default_factory=dict)
    connections: int = 0


class TaskSimulation:
    """The state of every simulated task and the answers of their control API."""

    def __init__(
        self, overlord: str, epoch: float, rate: float, publish_delay: float, startup: float
    ) -> None:
        self.overlord = overlord
        self.epoch, self.rate = epoch, rate
        self.publish_delay, self.startup = publish_delay, startup
        self.tasks: dict[str, SimTask] = {}  # alive
        self.publishing: set[asyncio.Task[None]] = set()  # publishes under way (see start_publish)
        self.history: dict[str, SimTask] = {}  # every task ever launched
        self.exits: list[tuple[str, int, dict[str, Any]]] = []
        self.requests = Requests()
        self.answers: dict[str, int] = {}  # the service's answers to publishes, counted
        self.http = Http(overlord)

    # -- the control API of one task -------------------------------------------------------

    def current(self, task: SimTask, now: float) -> dict[str, int]:
        if task.frozen is not None:
            return dict(task.frozen)
        live = latest_offset(self.epoch, self.rate, now)
        offsets = {p: max(o, live) for p, o in task.start.items()}
        if task.end is not None:
            offsets = {p: min(o, task.end[p]) for p, o in offsets.items()}
        return offsets

    def state(self, task: SimTask, now: float) -> str:
        if task.status == "READING" and now < task.launched + self.startup:
            return "STARTING"
        return task.status

    def metrics(self, task: SimTask, now: float) -> dict[str, Any]:
        read = sum(o - task.start[p] for p, o in self.current(task, now).items())
        return {
            "processed": read,
            "processedBytes": read * 100,
            "processedWithError": 0,
            "unparseable": 0,
            "thrownAway": 0,
        }

    def chat(
        self, method: str, task: SimTask, action: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        now = time.time()
        state = self.state(task, now)
        if (method, action) == ("GET", "status"):
            return 200, state
        if (method, action) == ("GET", "time/start"):
            return 200, None if state == "STARTING" else _iso(task.launched + self.startup)
        if (method, action) == ("GET", "offsets/current"):
            return 200, self.current(task, now)
        if (method, action) == ("GET", "offsets/end"):
            return 200, task.end or dict.fromkeys(task.start, END_OF_PARTITION)
        if (method, action) == ("GET", "metrics"):
            counters = {"persists": 0, "persistSeconds": 0.0, "handoffs": 0, "handoffSeconds": 0.0}
            return 200, {
                "rowStats": self.metrics(task, now),
                **counters,
                "pauseSeconds": 0.0,
                "currentOffsets": self.current(task, now),
            }
        if (method, action) == ("GET", "rowStats"):
            return 200, {"totals": {"buildSegments": self.metrics(task, now)}}
        if (method, action) == ("GET", "unparseableEvents"):
            return 200, {"buildSegments": []}
        if (method, action) == ("GET", "checkpoints"):
            return 200, {"0": task.start}
        if (method, action) == ("POST", "pause"):
            if state in ("STARTING", "PUBLISHING"):
                return 409, {"error": f"cannot pause a task that is {state}"}
            if task.frozen is None:
                task.frozen = self.current(task, now)
            task.status = "PAUSED"
            task.paused_at = task.paused_at or now
            return 200, task.frozen
        if (method, action) == ("POST", "resume"):
            task.frozen, task.status = None, "READING" if task.end is None else task.status
            return 200, {"status": task.status}
        if (method, action) == ("POST", "offsets/end"):
            finish = query.get("finish", ["true"])[0] != "false"
            task.frozen, task.status = None, "READING"
            if finish and task.end is None:
                task.end, task.rolled_at = {str(p): int(o) for p, o in body.items()}, now
                self.start_publish(task)
            return 200, task.end or body
        if (method, action) == ("POST", "stop"):
            if task.end is None:
                task.end, task.rolled_at = self.current(task, now), now
                self.start_publish(task)
            return 200, {"status": "stopping"}
        return 404, {"error": f"no {method} {action}"}

    def start_publish(self, task: SimTask) -> None:
        """Publish in the background, holding on to the asyncio task: the event loop keeps
        only a weak reference, and a collected one is dropped mid-way (its publish lost)."""
        running = asyncio.get_running_loop().create_task(self.publish(task))
        self.publishing.add(running)
        running.add_done_callback(self.publishing.discard)

    async def publish(self, task: SimTask) -> None:
        """Read to the end offsets (at once), "build" for `publish_delay`, publish one segment
        through the service's publish action, retrying while the predecessor publishes."""
        await asyncio.sleep(self.publish_delay)
        if task.id not in self.tasks:
            return  # killed meanwhile
        task.status = "PUBLISHING"
        end = task.end or {}
        segment = (
            f"{task.datasource}_{task.stream}_{sorted(task.start.items())}_{sorted(end.items())}"
        )
        action = {
            "type": "segmentTransactionalInsert",
            "supervisorId": task.supervisor,
            "dataSource": task.datasource,
            "segments": [
                {
                    "id": segment,
                    "dataSource": task.datasource,
                    "intervalStart": "2026-01-01T00:00:00+00:00",
                    "intervalEnd": "2026-01-01T01:00:00+00:00",
                    "version": "simulated",
                    "partitionNum": 0,
                    "path": f"/simulated/{task.id}",
                    "size": 1,
                    "numRows": 1,
                    "dimensions": [],
                    "metrics": [],
                }
            ],
            "startMetadata": {
                "type": "start",
                "stream": task.stream,
                "partitionSequenceNumberMap": task.start,
            },
            "endMetadata": {
                "type": "end",
                "stream": task.stream,
                "partitionSequenceNumberMap": end,
            },
        }
        body = {"task": task.id, "action": action}
        outcome, reason = "failed", "the publish did not finish in time"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and task.id in self.tasks:
            try:
                status, answer = await self.http.request(
                    "POST", ACTION, body, {TOKEN_HEADER: task.token}
                )
            except (OSError, ValueError, IndexError, asyncio.IncompleteReadError) as exc:
                reason = f"overlord unreachable: {type(exc).__name__}"
                await asyncio.sleep(0.5)
                continue
            payload = json.loads(answer) if answer else {}
            said = f"{status} {payload.get('error', '')}"[:120]
            self.answers[said] = self.answers.get(said, 0) + 1
            if status == 200:
                outcome, reason = str(payload["result"]["outcome"]), ""
                break
            outcome = str(payload.get("outcome", "failed"))
            reason = str(payload.get("error", answer[:200]))
            if outcome != "retry" and status < 500:
                break
            await asyncio.sleep(0.5)
        self.end(
            task, "SUCCESS" if outcome in ("published", "alreadyPublished") else "FAILED", reason
        )

    def end(self, task: SimTask, status: str, reason: str) -> None:
        if self.tasks.pop(task.id, None) is None:
            return
        now = time.time()
        task.status, task.ended_at, task.outcome = status, now, reason
        current = self.current(task, now)
        report: dict[str, Any] = {
            "status": status,
            "errorMsg": reason or None,
            "rowStats": self.metrics(task, now),
            "counters": {"persists": 0, "handoffs": 1 if status == "SUCCESS" else 0},
            "unparseableEvents": [],
            "segments": [],
            "currentOffsets": current,
            "endOffsets": task.end or {},
            "skippedOffsets": [],
            "readingSince": _iso(task.launched + self.startup),
        }
        self.exits.append((task.id, 0 if status == "SUCCESS" else 1, report))

    # -- the simulation's own endpoints (the runner's side) ---------------------------------

    def control(
        self, method: str, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        if (method, path) == ("POST", "/sim/batch"):
            for operation, what in body:
                self.control("POST", f"/sim/{operation}", {}, what)
            return 200, {}
        if (method, path) == ("POST", "/sim/launch"):
            task = SimTask(
                id=body["id"],
                supervisor=body["supervisor"],
                datasource=body["datasource"],
                stream=body["stream"],
                token=body["token"],
                start={str(p): int(o) for p, o in body["start"].items()},
                launched=time.time(),
            )
            self.tasks[task.id] = self.history[task.id] = task
            return 200, {}
        if (method, path) == ("POST", "/sim/kill"):
            killed = self.tasks.pop(body["id"], None)
            if killed is not None:
                killed.status, killed.ended_at, killed.outcome = "KILLED", time.time(), "killed"
            return 200, {"alive": killed is not None}
        if (method, path) == ("POST", "/sim/kill_all"):
            self.tasks.clear()
            return 200, {}
        if (method, path) == ("GET", "/sim/exited"):
            exits, self.exits = self.exits, []
            return 200, exits
        if (method, path) == ("GET", "/sim/stats"):
            return 200, self.stats()
        if (method, path) == ("GET", "/sim/wave"):
            return 200, self.wave(float(query["since"][0]))
        return 404, {"error": f"no {method} {path}"}

    def stats(self) -> dict[str, Any]:
        states: dict[str, int] = {}
        now = time.time()
        for task in self.tasks.values():
            states[self.state(task, now)] = states.get(self.state(task, now), 0) + 1
        return {
            "alive": len(self.tasks),
            "launched": len(self.history),
            "states": states,
            "requests": dict(self.requests.by_path),
            "connections": self.requests.connections,
            "publish_answers": self.answers,
        }

    def wave(self, since: float) -> dict[str, dict[str, list[float | None]]]:
        """Per supervisor, for each task given final end offsets after `since`: when it was
        first paused, when it got its end offsets, when its successor (a task starting at
        those end offsets) began reading (None: none yet) and when it ended (None: not yet)."""
        successors: dict[tuple[str, tuple[tuple[str, int], ...]], list[SimTask]] = {}
        for task in self.history.values():
            key = (task.supervisor, tuple(sorted(task.start.items())))
            successors.setdefault(key, []).append(task)
        result: dict[str, dict[str, list[float | None]]] = {}
        for task in self.history.values():
            if task.rolled_at is None or task.rolled_at < since or task.end is None:
                continue
            after = successors.get((task.supervisor, tuple(sorted(task.end.items()))), [])
            entry = result.setdefault(
                task.supervisor, {"paused": [], "rolled": [], "reading": [], "ended": []}
            )
            entry["paused"].append(task.paused_at or task.rolled_at)
            entry["rolled"].append(task.rolled_at)
            entry["reading"].append(
                min(s.launched for s in after) + self.startup if after else None
            )
            entry["ended"].append(task.ended_at)
        return result


async def _handle(
    sim: TaskSimulation, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """HTTP/1.1 with keep-alive, just enough for the service's httpx clients."""
    sim.requests.connections += 1
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers: dict[str, str] = {}
            while True:
                header = await reader.readline()
                if header in (b"\r\n", b"\n", b""):
                    break
                name, _, value = header.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            size = int(headers.get("content-length", "0"))
            raw = await reader.readexactly(size) if size else b""
            body = json.loads(raw) if raw else None
            url = urlsplit(target)
            query = parse_qs(url.query)
            if url.path.startswith(CHAT):
                task_id, _, action = url.path[len(CHAT) :].partition("/")
                key = f"{method} {action}"
                sim.requests.by_path[key] = sim.requests.by_path.get(key, 0) + 1
                task = sim.tasks.get(task_id)
                if task is None:
                    return  # an ended task: nobody listens on its port any more
                if headers.get(TOKEN_HEADER.lower()) != task.token:
                    status, payload = 403, {"error": "missing or wrong task token"}
                else:
                    status, payload = sim.chat(method, task, action, query, body)
            else:
                status, payload = sim.control(method, url.path, query, body)
            data = json.dumps(payload).encode()
            writer.write(
                b"HTTP/1.1 %d SIM\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                % (status, len(data))
                + data
            )
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                return
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        return
    finally:
        writer.close()


async def _serve(port: int, sim: TaskSimulation) -> None:
    server = await asyncio.start_server(
        lambda r, w: _handle(sim, r, w), "127.0.0.1", port, backlog=4096
    )
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--overlord", required=True, help="the service's URL")
    parser.add_argument("--epoch", type=float, default=time.time(), help="stream start (wall)")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s per partition")
    parser.add_argument("--publish-delay", type=float, default=1.0)
    parser.add_argument("--startup", type=float, default=0.0, help="STARTING for this long")
    args = parser.parse_args()
    sim = TaskSimulation(args.overlord, args.epoch, args.rate, args.publish_delay, args.startup)
    asyncio.run(_serve(args.port, sim))


if __name__ == "__main__":
    main()
