"""Runs each indexing task as a local `python -m tasks` process (a Spark driver)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from supervisor.devstack.ports import free_port
from supervisor.settings import Settings

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Launched:
    host: str
    port: int
    log_path: str
    token: str


@dataclass(frozen=True)
class Exited:
    task_id: str
    exit_code: int
    report: dict[str, Any] | None


class LocalProcessRunner:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.lock = threading.Lock()

    def work_dir(self, task_id: str) -> Path:
        return (self.settings.work_dir / "tasks" / task_id).resolve()

    def launch(self, task_id: str, payload: dict[str, Any]) -> Launched:
        work = self.work_dir(task_id)
        work.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(16)
        token_file = work / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        (work / "payload.json").write_text(json.dumps(payload))
        port = free_port()
        log_path = work / "task.log"
        command = [
            sys.executable,
            "-m",
            "tasks",
            "--payload",
            str(work / "payload.json"),
            "--overlord",
            self.settings.advertised_url(),
            "--token-file",
            str(token_file),
            "--host",
            HOST,
            "--port",
            str(port),
            "--work-dir",
            str(work),
            "--deep-storage",
            str(self.settings.deep_storage.resolve()),
            "--jar-cache",
            str(self.settings.jar_cache),
            "--master",
            self.settings.task_master,
        ]
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=work,
            )
        with self.lock:
            self.processes[task_id] = process
        return Launched(HOST, port, str(log_path), token)

    def exited(self) -> list[Exited]:
        """Tasks whose process has ended since the last call, with their final report."""
        done: list[Exited] = []
        with self.lock:
            for task_id, process in list(self.processes.items()):
                code = process.poll()
                if code is None:
                    continue
                del self.processes[task_id]
                report_file = self.work_dir(task_id) / "report.json"
                report = json.loads(report_file.read_text()) if report_file.exists() else None
                done.append(Exited(task_id, code, report))
        return done

    def is_running(self, task_id: str) -> bool:
        with self.lock:
            process = self.processes.get(task_id)
            return process is not None and process.poll() is None

    def kill(self, task_id: str) -> bool:
        with self.lock:
            process = self.processes.get(task_id)
        if process is None or process.poll() is not None:
            return False
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
        return True

    def kill_all(self) -> None:
        with self.lock:
            ids = list(self.processes)
        for task_id in ids:
            self.kill(task_id)
