"""Runs each indexing task as a local `python -m tasks` process (a Spark driver)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

from supervisor.clients.task_api import TaskApiClient, TaskApiError
from supervisor.net import free_port
from supervisor.runner.files import process_alive, read_report, write_private
from supervisor.runner.protocol import Exited, Launched
from supervisor.runner.spawn import runtime_args, spawn
from supervisor.settings import Settings
from tasks.protocol import AnyTask, TaskReport

HOST = "127.0.0.1"
# each task is called at least this often (or a quarter of the orphan timeout) while an
# overlord leads
KEEPALIVE_S = 60.0


def _alive(pid: int, work: Path) -> bool:
    """Whether `pid` is still the task process started in `work` (not a zombie, not reused)."""
    return process_alive(pid, str(work).encode())


class LocalProcessRunner:
    """Task processes run in sessions of their own, so they outlive the overlord; a new
    overlord adopts them by the pid each one leaves in its work directory."""

    def __init__(self, settings: Settings, host: str = HOST) -> None:
        self.settings = settings
        self.host = host  # where tasks serve their chat API (a task host's own address)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.adopted: dict[str, int] = {}
        self.lock = threading.Lock()
        self.called_at = time.monotonic()  # when the tasks were last called (_keep_alive)

    def work_dir(self, task_id: str) -> Path:
        return (self.settings.work_dir / "tasks" / task_id).resolve()

    def _command(self, work: Path, payload: Path, token_file: Path, port: int) -> list[str]:
        args = runtime_args(self.settings, self.host, port, token_file)
        return [
            *(sys.executable, "-m", "tasks", *args.argv()),
            *("--payload", str(payload), "--work-dir", str(work)),
            *("--publish-niceness", str(self.settings.publish_niceness)),
        ]

    def _popen(self, command: list[str], work: Path, log_path: Path) -> subprocess.Popen[bytes]:
        process = spawn(command, work, log_path)
        (work / "pid").write_text(str(process.pid))
        return process

    def prepare(self) -> None:
        """Nothing: each task starts a process of its own."""

    def release(self) -> None:
        """Nothing: each task's process ends with it."""

    def launch(self, task: AnyTask) -> Launched:
        task_id, payload = task.id, json.dumps(task.to_json())
        token = secrets.token_hex(16)
        work = self.work_dir(task_id)
        work.mkdir(parents=True, exist_ok=True)
        token_file = work / "token"
        write_private(token_file, token)
        write_private(work / "payload.json", payload)
        port = free_port(self.host)
        (work / "port").write_text(str(port))  # where it serves, should its launch go unrecorded
        log_path = work / "task.log"
        process = self._popen(
            self._command(work, work / "payload.json", token_file, port), work, log_path
        )
        with self.lock:
            self.processes[task_id] = process
        return Launched(self.host, port, str(log_path), token, self.settings.scheme)

    def adopt(self, task_id: str) -> bool:
        """Watch a task process an earlier overlord started; False when it is gone."""
        work = self.work_dir(task_id)
        try:
            pid = int((work / "pid").read_text())
        except (OSError, ValueError):
            return False
        if not _alive(pid, work):
            return False
        with self.lock:
            self.adopted[task_id] = pid
        return True

    def located(self, task_id: str) -> Launched | None:
        work = self.work_dir(task_id)
        try:
            port = int((work / "port").read_text())
            token = (work / "token").read_text().strip()
        except (OSError, ValueError):
            return None
        return Launched(self.host, port, str(work / "task.log"), token, self.settings.scheme)

    def report(self, task_id: str) -> TaskReport | None:
        return read_report(self.work_dir(task_id))

    def exited(self) -> list[Exited]:
        """Tasks whose process has ended since the last call, with their final report. Asked
        only while an overlord leads (its monitor, or a task host's sync): every KEEPALIVE_S it
        also calls each task, which a task no supervisor probes (one of `POST /task`, or of a
        supervisor with a long period) needs to know it is not orphaned
        (tasks/runtime/orphan.py)."""
        every = min(KEEPALIVE_S, self.settings.orphan_timeout_s / 4 or KEEPALIVE_S)
        if time.monotonic() - self.called_at >= every:
            self.called_at = time.monotonic()
            threading.Thread(target=self._keep_alive, name="task-keepalive", daemon=True).start()
        done: list[Exited] = []
        with self.lock:
            for task_id, process in list(self.processes.items()):
                code = process.poll()
                if code is None:
                    continue
                del self.processes[task_id]
                done.append(Exited(task_id, code, self.report(task_id)))
            for task_id, pid in list(self.adopted.items()):
                if not _alive(pid, self.work_dir(task_id)):
                    del self.adopted[task_id]
                    done.append(Exited(task_id, None, self.report(task_id)))
        return done

    def _keep_alive(self) -> None:
        for task_id in self.running():
            at = self.located(task_id)
            if at is None:
                continue
            client = TaskApiClient(at.host, at.port, task_id, at.token, 2.0, scheme=at.scheme)
            with suppress(TaskApiError):
                client.status()

    def is_running(self, task_id: str) -> bool:
        with self.lock:
            process = self.processes.get(task_id)
            if process is not None:
                return process.poll() is None
            pid = self.adopted.get(task_id)
        return pid is not None and _alive(pid, self.work_dir(task_id))

    def running(self) -> list[str]:
        """The tasks started or adopted here that have not been seen to end."""
        with self.lock:
            return sorted({*self.processes, *self.adopted})

    def kill(self, task_id: str) -> bool:
        """SIGKILL a live task process; True if it was alive. The killer records the outcome:
        a killed task is no longer watched, so `exited` never reports it as well."""
        with self.lock:
            process = self.processes.get(task_id)
            pid = self.adopted.get(task_id)
            if process is not None and process.poll() is None:
                del self.processes[task_id]
            elif pid is not None and process is None and _alive(pid, self.work_dir(task_id)):
                del self.adopted[task_id]
            else:
                return False  # already ended: `exited` reports it
        if process is not None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
            return True
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)  # the task leads its own process group
        deadline = time.monotonic() + 30
        while _alive(pid, self.work_dir(task_id)) and time.monotonic() < deadline:
            time.sleep(0.05)
        return True

    def kill_all(self) -> None:
        with self.lock:
            ids = [*self.processes, *self.adopted]
        for task_id in ids:
            self.kill(task_id)
