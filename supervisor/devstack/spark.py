"""A real Spark standalone cluster on loopback: one Master and N Workers started from pyspark's
own jars (`spark-class`), nothing downloaded. Used by `sluicegate spark-local` and the tests of
tasks on a `spark://` master."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from supervisor.devstack.server import Managed, stop_group
from supervisor.net import free_port

HOST = "127.0.0.1"
SPARK_SECRET_VARIABLE = "_SPARK_AUTH_SECRET"  # where Spark's daemons read a cluster's secret
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


class SparkClusterError(RuntimeError):
    """The master or a worker did not start."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _environment(log_dir: Path, host: str, secret: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if secret:  # master and workers take only peers that know it (and give it to executors)
        env[SPARK_SECRET_VARIABLE] = secret
        env["SPARK_MASTER_OPTS"] = env["SPARK_WORKER_OPTS"] = "-Dspark.authenticate=true"
    env.update(
        {
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": host,
            "SPARK_LOG_DIR": str(log_dir),
            # executors' Python workers run the venv's interpreter, as local mode's do
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1",
        }
    )
    return env


class LocalSparkCluster(Managed):
    """A master on `port` (0: a free one) and `workers` workers, each offering `cores` cores and
    `memory` to executors, their state under `data_dir`. `stop` ends every process it began."""

    def __init__(
        self,
        data_dir: Path,
        workers: int = 2,
        cores: int = 4,
        memory: str = "4g",
        port: int = 0,
        host: str = HOST,
        secret: str | None = None,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.host = host  # the address the master and the workers listen on
        self.secret = secret  # None: unauthenticated (a drivers' SLUICEGATE_SPARK_SECRET)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = port or free_port()
        self.ui_port = free_port()
        self.processes: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    @property
    def url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.ui_port}"

    def _spawn(self, name: str, *args: str) -> None:
        logs = self.data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{name}.log"
        spark_class = spark_home() / "bin" / "spark-class"
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [str(spark_class), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=_environment(logs, self.host, self.secret),
                start_new_session=True,
                cwd=self.data_dir,
            )
        self.processes.append(process)
        self.logs.append(log_path)

    def start(self, timeout: float = 90.0) -> LocalSparkCluster:
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SparkClusterError(f"cannot make the data directory: {exc}") from None
        if not (spark_home() / "bin" / "spark-class").exists():
            raise SparkClusterError("pyspark has no bin/spark-class; `make setup` installs it")
        self._spawn(
            "master",
            MASTER,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        deadline = time.monotonic() + timeout
        self._wait(lambda state: state is not None, deadline, "the master")
        for index in range(self.workers):
            self._spawn_worker(index)
        self._wait(
            self._all_alive,
            deadline,
            f"{self.workers} workers",
        )
        return self

    def _spawn_worker(self, index: int) -> None:
        work = self.data_dir / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        self._spawn(
            f"worker-{index}",
            WORKER,
            "--host",
            self.host,
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(work),
            "--webui-port",
            str(free_port()),
            self.url,
        )

    def state(self) -> dict[str, object] | None:
        """The master's own view (its web UI's /json), or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=2) as response:
                answer: dict[str, object] = json.load(response)
                return answer
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def _all_alive(self, state: dict[str, object] | None) -> bool:
        return state is not None and self._alive_workers(state) >= self.workers

    @staticmethod
    def _alive_workers(state: dict[str, object]) -> int:
        workers = state.get("workers")
        if not isinstance(workers, list):
            return 0
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def alive_workers(self) -> int:
        state = self.state()
        return 0 if state is None else self._alive_workers(state)

    def _wait(
        self, ready: Callable[[dict[str, object] | None], bool], deadline: float, what: str
    ) -> None:
        while time.monotonic() < deadline:
            for process, log in zip(self.processes, self.logs, strict=True):
                if process.poll() is not None:
                    raise SparkClusterError(
                        f"{log.stem} exited with code {process.returncode}: {_last_line(log)} "
                        f"(log: {log})"
                    )
            if ready(self.state()):
                return
            time.sleep(0.25)
        raise SparkClusterError(f"{what} did not start in time (logs in {self.data_dir}/logs)")

    def kill_worker(self, index: int) -> None:
        """SIGKILL one worker (and the executors it started), as a host failure would."""
        process = self.processes[1 + index]
        _signal_group(process, signal.SIGKILL)
        process.wait(30)

    def restart_worker(self, index: int, timeout: float = 90.0) -> None:
        """Start again a worker `kill_worker` stopped; returns once the master has every
        worker alive."""
        process = self.processes[1 + index]
        if process.poll() is None:
            raise SparkClusterError(f"worker {index} is running")
        self._spawn_worker(index)
        # the new process takes the place of the old, so that index goes on naming it
        self.processes[1 + index] = self.processes.pop()
        self.logs[1 + index] = self.logs.pop()
        self._wait(
            self._all_alive,
            time.monotonic() + timeout,
            f"worker {index} again",
        )

    def wait(self) -> int:
        """Until the master exits; its exit code."""
        return self.processes[0].wait()

    def stop(self) -> None:
        stop_group(list(reversed(self.processes)))
        self.processes.clear()
        self.logs.clear()


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1].strip() if lines else "no output"
