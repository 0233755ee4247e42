"""The task host's state: its runner, the exits it has seen, and the heartbeat that keeps its
row in the metadata DB (through an overlord's API: a host never opens the DB)."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from supervisor.model.retention import minus
from supervisor.runner import HostRunner, host_runner
from supervisor.runner.files import cap_app_log, prune_work_dirs, write_private
from supervisor.runner.protocol import Exited, Launched
from supervisor.schemas.worker import Heartbeat, HeartbeatAnswer, WorkerExit, WorkerState
from supervisor.settings import Settings
from tasks.protocol import AnyTask
from tasks.spec.periods import parse_period

log = logging.getLogger(__name__)
HEARTBEAT_S = 2.0  # until the overlord says its timeout: then a fifth of it
KEPT_EXITS = 1000  # exits answered for (an overlord that missed one asks again)
REGISTER = "/druid-internal/v1/workers"
PRUNE_EVERY_S = 300.0  # ended tasks' work directories past their retention, deleted


class HeartbeatRefused(Exception):
    """No overlord took a heartbeat: `status_code` None when none could be reached."""

    def __init__(self, message: str, status_code: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


Send = Callable[[dict[str, Any]], Any]  # a heartbeat to an overlord, its answer back
DEFAULT_CATEGORY = "_default_worker_category"


def any_of(sends: list[Send]) -> Send:
    """A heartbeat to the first of several overlords that takes it, the one that took the last
    tried first: a host given both overlords of a pair goes on beating while either is down (a
    follower records it in the shared metadata DB, as the leader would). Refused by all: the
    refusal of one that answered, if any did (its status says why), else that none could be
    reached."""
    order = list(range(len(sends)))
    lock = threading.Lock()

    def send(heartbeat: dict[str, Any]) -> Any:
        with lock:
            tried = list(order)
        refusals: list[HeartbeatRefused] = []
        for index in tried:
            try:
                answer = sends[index](heartbeat)
            except HeartbeatRefused as exc:
                refusals.append(exc)
                continue
            with lock:
                order.remove(index)
                order.insert(0, index)
            return answer
        answered = [r for r in refusals if r.status_code is not None]
        raise (answered or refusals)[0]

    return send


@dataclass(frozen=True)
class Identity:
    """How the host is known: its API's host:port, scheme and address."""

    host: str
    port: int
    scheme: str
    capacity: int
    version: str

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"


class WorkerAgent:
    """`send`: a heartbeat to the overlords' API (following a follower's redirect to the
    leader), raising HeartbeatRefused. `settings`: the runner's (work_dir, task_master,
    jar_cache, overlord_url, TLS); deep storage comes from the overlord's answer to the first
    heartbeat."""

    def __init__(self, identity: Identity, settings: Settings, send: Send) -> None:
        self.identity = identity
        self.settings = settings
        self.send = send
        self.token = _token(settings.work_dir / "worker-token")
        self.runner: HostRunner | None = None  # once the overlord has answered
        self.exits: OrderedDict[str, Exited] = OrderedDict()
        self.assigned: set[str] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.registered = threading.Event()
        self.last_error: str | None = None
        self.period = HEARTBEAT_S
        self.thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)

    # ---- registration and heartbeats -------------------------------------------------------

    def register(self) -> None:
        """The first heartbeat, answered before anything else starts: raises ServiceError when
        no overlord takes it (a wrong URL, refused credentials)."""
        answer = self.send(self._heartbeat())
        self._configure(answer)
        self.registered.set()

    def start(self) -> None:
        self.thread.start()

    def _heartbeat(self) -> dict[str, Any]:
        ident = self.identity
        beat = Heartbeat(
            host=ident.name,
            scheme=ident.scheme,
            ip=ident.host,
            capacity=ident.capacity,
            version=ident.version,
            category=DEFAULT_CATEGORY,
            token=self.token,
        )
        return beat.model_dump()

    def _configure(self, raw: Any) -> None:
        try:
            answer = HeartbeatAnswer.model_validate(raw)
        except ValidationError:
            raise HeartbeatRefused(
                "the overlord's answer to the heartbeat has no deepStorage", 200
            ) from None
        timeout = answer.heartbeatTimeoutS
        if timeout is not None and timeout > 0:
            self.period = min(5.0, max(0.5, timeout / 5))
        if self.runner is not None:
            return
        self.settings.deep_storage = answer.deepStorage
        runner = host_runner(self.settings, host=self.identity.host)
        # task processes by their pid files; a shared application's tasks by its own list
        left = {*_task_dirs(self.settings.work_dir / "tasks"), *runner.running()}
        for task_id in sorted(left):
            if runner.adopt(task_id):
                log.info("adopted task %s, still running from before this start", task_id)
        runner.prepare()
        self.runner = runner

    def _beat(self) -> None:
        # the first prune at once: a host killed more often than PRUNE_EVERY_S never pruned
        # (a soak killing it every 5 minutes kept every task's directory)
        pruned_at = time.monotonic() - PRUNE_EVERY_S
        while not self.stopping.wait(self.period):
            if time.monotonic() - pruned_at >= PRUNE_EVERY_S and self.runner is not None:
                pruned_at = time.monotonic()
                self._prune(self.runner)
            try:
                self._configure(self.send(self._heartbeat()))
                if self.last_error is not None:
                    log.info("heartbeats answered again")
                self.last_error = None
            except HeartbeatRefused as exc:
                if exc.message != self.last_error:
                    log.warning("heartbeat not taken: %s", exc.message)
                self.last_error = exc.message

    def _prune(self, runner: HostRunner) -> None:
        """Work directories of tasks that ended over SLUICEGATE_TASK_RETENTION ago, and the
        application's log cut past SLUICEGATE_APP_LOG_MAX_MB."""
        now = datetime.now(UTC)
        cutoff = minus(now, parse_period(self.settings.task_retention)).timestamp()
        pruned = prune_work_dirs(self.settings.work_dir / "tasks", cutoff, runner.is_running)
        if pruned:
            log.info("deleted the work directories of %d tasks ended long ago", len(pruned))
        if cap_app_log(self.settings.work_dir, self.settings.app_log_max_mb):
            log.info("the task host application's log was cut (its lines in app.log.1)")

    # ---- the tasks -------------------------------------------------------------------------

    def _runner(self) -> HostRunner:
        if self.runner is None:
            raise RuntimeError("not registered yet")
        return self.runner

    def assign(self, task: AnyTask) -> Launched:
        """Start the task; FileExistsError when it was assigned here before (an overlord that
        got no answer may try again: the first one runs, no second)."""
        runner = self._runner()
        with self.lock:
            if task.id in self.assigned or runner.work_dir(task.id).exists():
                raise FileExistsError(task.id)
            self.assigned.add(task.id)
        return runner.launch(task)

    def state(self) -> WorkerState:
        """What runs here and what has ended (with reports), for the overlord's sync."""
        runner = self._runner()
        self._collect()
        running = runner.running()
        with self.lock:
            exits = [
                WorkerExit(task=e.task_id, exitCode=e.exit_code, report=e.report)
                for e in self.exits.values()
            ]
        return WorkerState(host=self.identity.name, running=running, exited=exits)

    def _collect(self) -> None:
        for exited in self._runner().exited():
            with self.lock:
                self.exits[exited.task_id] = exited
                while len(self.exits) > KEPT_EXITS:
                    self.exits.popitem(last=False)

    def kill(self, task_id: str) -> bool:
        return self._runner().kill(task_id)

    def report(self, task_id: str) -> dict[str, Any] | None:
        report = self._runner().report(task_id)
        return None if report is None else report.model_dump(mode="json")

    def log_path(self, task_id: str) -> Path:
        return self._runner().work_dir(task_id) / "task.log"

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(10)
        if self.runner is not None and self.settings.kill_tasks_on_exit:
            self.runner.kill_all()


def _token(path: Path) -> str:
    """The secret the overlords call this host's API with, kept across restarts."""
    try:
        token = path.read_text().strip()
        if len(token) >= 32:
            return token
    except OSError:
        pass
    token = secrets.token_hex(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, token)
    return token


def _task_dirs(root: Path) -> list[str]:
    try:
        return sorted(p.name for p in root.iterdir() if (p / "pid").exists())
    except OSError:
        return []
