"""Runs every task of this host inside one long-lived Spark application (tasks/runtime/shared.py),
started on the first launch and kept: a task starts with no JVM start-up and costs a thread,
not a driver. The application runs in a session of its own and outlives the overlord or task
host that started it; `app.json` in its directory (pid, port, scheme) and its token file let
the next one adopt it and its tasks.

What the runner asks the application goes over its API on loopback (assign, list, kill,
forget); a task's work directory, payload, log and report.json are where a task process keeps
them (tasks/<id>/), so reports, logs and adoption read them the same way."""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from supervisor.clients.host_app_api import HostApp, HostAppClient
from supervisor.net import free_port
from supervisor.runner.files import APP_DIR, APP_LOG, process_alive, read_report, write_private
from supervisor.runner.protocol import Exited, Launched
from supervisor.runner.spawn import runtime_args, spawn
from supervisor.settings import Settings
from tasks.host_protocol import Assignment, HostedTask
from tasks.protocol import AnyTask, TaskReport

HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
# Assignments sent to the application at once: each builds a task's run (its Kafka client, its
# chat app) on the application's GIL beside its running tasks; sixty at once (a wave of passes
# that waited on tasks) took over the 10 s timeout, and their tasks failed to start.
ASSIGNS_AT_ONCE = 4
VIEW_TTL_S = 0.25  # a list of the application's tasks answers is_running this long
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _View:
    asked_at: float  # monotonic, before the request went out
    tasks: dict[str, HostedTask]


def _alive(pid: int) -> bool:
    """Whether `pid` is still a task host application (not a zombie, not a reused pid)."""
    return process_alive(pid, b"tasks.host_app")


class SharedAppRunner:
    def __init__(self, settings: Settings, host: str = HOST) -> None:
        self.settings = settings
        self.host = host  # where the application serves the tasks' chat API
        self.dir = (settings.work_dir / APP_DIR).resolve()
        self.tasks_dir = (settings.work_dir / "tasks").resolve()
        self.lock = threading.Lock()  # the fields below; never held across a call or a start
        self.start_lock = threading.Lock()  # one start of the application at a time
        self.preparing = False
        self.app: HostApp | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.watched: dict[str, float] = {}  # task id -> when launched or adopted (monotonic)
        self.view: _View | None = None
        self.client = HostAppClient(host)
        self.assigning = threading.BoundedSemaphore(ASSIGNS_AT_ONCE)

    def work_dir(self, task_id: str) -> Path:
        return self.tasks_dir / task_id

    # ---- the application -------------------------------------------------------------------

    def _known(self) -> HostApp | None:
        """Under the lock: the application, if one runs (ours, or one an earlier overlord left)."""
        if self.app is not None and _alive(self.app.pid):
            return self.app
        self.app = None
        try:
            saved = json.loads((self.dir / "app.json").read_text())
            token = (self.dir / "token").read_text().strip()
            app = HostApp(int(saved["pid"]), int(saved["port"]), str(saved["scheme"]), token)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not _alive(app.pid):
            return None
        self.app = app
        return app

    def _ensure(self) -> HostApp:
        """The running application, started now if none runs."""
        with self.start_lock:
            with self.lock:
                app = self._known()
            if app is not None:
                return app
            app = self._start()
            with self.lock:
                self.app = app
            return app

    def _start(self) -> HostApp:
        """Under the start lock: a new application, once it answers."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tasks_dir.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(16)
        write_private(self.dir / "token", token)
        port = free_port(self.host)
        settings = self.settings
        args = runtime_args(settings, self.host, port, self.dir / "token")
        command = [sys.executable, "-m", "tasks.host_app", *args.argv()]
        command += ["--tasks-dir", str(self.tasks_dir)]
        self.child = spawn(command, self.dir, self.dir / APP_LOG)
        app = HostApp(self.child.pid, port, settings.scheme, token)
        write_private(
            self.dir / "app.json",
            json.dumps({"pid": app.pid, "port": port, "scheme": app.scheme}),
        )
        self._wait_until_serving(app)
        log.info("task host application started (pid %s, port %s)", app.pid, port)
        return app

    def _wait_until_serving(self, app: HostApp) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self.client.tasks(app)
                return
            except OSError:
                if self.child is not None and self.child.poll() is not None:
                    raise OSError(
                        f"the task host application exited ({self.child.returncode}); "
                        f"see {self.dir / APP_LOG}"
                    ) from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _tasks(self) -> _View | None:
        """The application's tasks now; None when no application runs, OSError when one
        runs but did not answer."""
        with self.lock:
            app = self._known()
        if app is None:
            return None
        asked_at = time.monotonic()
        view = _View(asked_at, self.client.tasks(app))
        with self.lock:
            self.view = view
        return view

    # ---- the runner's protocol ----------------------------------------------------------------

    def prepare(self) -> None:
        """Start (or adopt) the application now, in the background: its Spark starts before the
        first task comes, which then pays no start-up at all. Cheap when it runs already."""
        with self.lock:
            if self.preparing or (self.app is not None and _alive(self.app.pid)):
                return
            self.preparing = True

        def start() -> None:
            try:
                self._ensure()
            except OSError as exc:  # tried again by the first launch
                log.warning("the task host application did not start: %s", exc)
            finally:
                with self.lock:
                    self.preparing = False

        threading.Thread(target=start, name="host-app-start", daemon=True).start()

    def launch(self, task: AnyTask) -> Launched:
        task_id = task.id
        token = secrets.token_hex(16)
        work = self.work_dir(task_id)
        work.mkdir(parents=True, exist_ok=True)
        payload = task.to_json()
        write_private(work / "payload.json", json.dumps(payload))
        write_private(work / "token", token)
        with self.lock:  # running while assigned: a list asked for meanwhile may lack it
            self.watched[task_id] = math.inf  # (and no release stops the application now)
        app: HostApp | None = None
        try:
            app = self._ensure()
            # checked where it is read: a URL the application refuses is its 400 (an OSError)
            url = self.settings.advertised_url()
            body = Assignment.model_construct(payload=task, token=token, overlord=url)
            with self.assigning:
                self.client.assign(app, body)
        except OSError:
            with self.lock:
                self.watched.pop(task_id, None)
            if app is not None:
                with suppress(OSError):  # an assignment whose answer was lost must not run on
                    self.client.kill(app, task_id)
                    self.client.forget(app, task_id)
            raise
        with self.lock:
            if task_id in self.watched:
                self.watched[task_id] = time.monotonic()
        return Launched(self.host, app.port, str(work / "task.log"), token, app.scheme)

    def is_running(self, task_id: str) -> bool:
        """Whether a task launched or adopted here still runs (one an earlier overlord left
        is not, until adopted: as for task processes)."""
        with self.lock:
            view, launched = self.view, self.watched.get(task_id)
        if launched is None:
            return False
        if view is None or time.monotonic() - view.asked_at > VIEW_TTL_S:
            try:
                view = self._tasks()
            except OSError:  # alive but slow to answer: what it ran, it still runs
                return True
            if view is None:
                return False
        entry = view.tasks.get(task_id)
        if entry is None:  # not there yet when the list was asked for
            return launched >= view.asked_at
        return entry.running

    def running(self) -> list[str]:
        try:
            view = self._tasks()
        except OSError:
            with self.lock:
                return sorted(self.watched)
        if view is None:
            return []
        return sorted(t for t, entry in view.tasks.items() if entry.running)

    def kill(self, task_id: str) -> bool:
        """Fence and stop a running task (tasks/runtime/shared.py); True if it was running. The
        killer records the outcome: `exited` never reports it."""
        with self.lock:
            app = self._known()
            self.view = None
        if app is None:
            return False  # gone with the application: `exited` reports it
        try:
            killed = self.client.kill(app, task_id)
        except OSError as exc:  # still watched: its end is reported when the application says
            log.warning("task %s: kill not confirmed: %s", task_id, exc)
            return False
        if not killed:
            return False  # it had ended: `exited` reports it
        with self.lock:
            self.watched.pop(task_id, None)
        with suppress(OSError):  # else forgotten when the application ends
            self.client.forget(app, task_id)
        return True

    def adopt(self, task_id: str) -> bool:
        try:
            view = self._tasks()
        except OSError as exc:
            log.warning("task %s not adopted: %s", task_id, exc)
            return False
        entry = None if view is None else view.tasks.get(task_id)
        if entry is None or not entry.running:
            return False
        with self.lock:
            self.watched[task_id] = time.monotonic()
        return True

    def located(self, task_id: str) -> Launched | None:
        work = self.work_dir(task_id)
        with self.lock:
            app = self._known()
        try:
            token = (work / "token").read_text().strip()
        except OSError:
            return None
        if app is None:
            return None
        return Launched(self.host, app.port, str(work / "task.log"), token, app.scheme)

    def report(self, task_id: str) -> TaskReport | None:
        return read_report(self.work_dir(task_id))

    def exited(self) -> list[Exited]:
        """Watched tasks that ended since the last call; all of them when the application
        is gone (killed with its host, or crashed)."""
        if self.child is not None:
            self.child.poll()  # reaped, so a dead one is not taken for alive
        try:
            view = self._tasks()
        except OSError:
            return []  # alive but slow to answer: asked again on the next call
        done: list[Exited] = []
        with self.lock:
            for task_id, since in list(self.watched.items()):
                if since == math.inf:
                    continue  # being assigned: its launch answers for it
                entry = None if view is None else view.tasks.get(task_id)
                if entry is not None and entry.exitCode is None:
                    continue  # running
                if entry is None and view is not None and since >= view.asked_at:
                    continue  # launched after the list was asked for
                del self.watched[task_id]
                if entry is None:
                    reason = "its task host application is gone"
                    done.append(Exited(task_id, None, self.report(task_id), reason))
                else:
                    done.append(Exited(task_id, entry.exitCode, self.report(task_id)))
            app = self.app
            # ended and no longer anyone's (reported, killed, or ended before an adoption)
            forget = [e.task_id for e in done if e.exit_code is not None]
            if view is not None:
                forget += [
                    task_id
                    for task_id, entry in view.tasks.items()
                    if entry.exitCode is not None
                    and task_id not in self.watched
                    and task_id not in forget
                ]
        for task_id in forget:
            if app is not None:
                with suppress(OSError):  # else forgotten when the application ends
                    self.client.forget(app, task_id)
        return done

    def release(self) -> None:
        """Stop the application if it runs no task (the overlord stops, or tasks run on task
        hosts now): it holds a Spark application's cores and memory for nothing. A later
        launch starts it again; tasks that ended in it left their reports in their work
        directories."""
        with self.start_lock:  # no start meanwhile; a launch waits for the stop to finish
            with self.lock:
                app = None if self._assigning() else self._known()
            if app is None:
                return
            try:
                view = self._tasks()
            except OSError:
                return
            with self.lock:
                if view is None or self._assigning():
                    return
                if any(entry.running for entry in view.tasks.values()):
                    return
                self.app, self.view = None, None
            log.info("task host application stopped (pid %s): no task runs here", app.pid)
            self._signal(app, signal.SIGTERM, 15)
            with suppress(ProcessLookupError):
                os.killpg(app.pid, signal.SIGKILL)

    def _signal(self, app: HostApp, sig: int, wait_s: float) -> None:
        """Signal the application's process group; wait up to `wait_s` for it to end."""
        with suppress(ProcessLookupError):
            os.killpg(app.pid, sig)
        deadline = time.monotonic() + wait_s
        while _alive(app.pid) and time.monotonic() < deadline:
            if self.child is not None:
                self.child.poll()
            time.sleep(0.05)

    def _assigning(self) -> bool:
        """Under the lock: whether a launch is handing a task to the application now."""
        return math.inf in self.watched.values()

    def kill_all(self) -> None:
        """Kill every task and the application with them."""
        with self.lock:
            app = self._known()
            self.watched.clear()
            self.view = None
        if app is None:
            return
        self._signal(app, signal.SIGKILL, 30)
        with self.lock:
            self.app = None
