"""How a runner starts a task runtime's process: its arguments from the settings (one
definition for both runtimes, tasks/runtime_args.py), in a session of its own (it outlives
the overlord, which adopts it when it comes back), its output appended to a log."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from supervisor.settings import Settings
from tasks.logs import private_log
from tasks.runtime_args import RuntimeArgs


def runtime_args(settings: Settings, host: str, port: int, token_file: Path) -> RuntimeArgs:
    cert, key = settings.tls_cert, settings.tls_key
    tls = (cert.resolve(), key.resolve()) if cert is not None and key is not None else (None, None)
    return RuntimeArgs(
        overlord=settings.advertised_url(),
        token_file=token_file,
        port=port,
        deep_storage=settings.storage().location,
        jar_cache=settings.jar_cache,
        host=host,
        master=settings.task_master,
        cores=settings.task_cores,
        executor_memory=settings.task_executor_memory,
        driver_memory=settings.task_driver_memory,
        fixed_heap=settings.task_fixed_heap and settings.task_runtime == "shared",
        malloc_arenas=settings.task_malloc_arenas,
        tls_cert=tls[0],
        tls_key=tls[1],
        log_format=settings.log_format,
        orphan_timeout_s=settings.orphan_timeout_s,
    )


def spawn(
    command: list[str], cwd: Path, log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """The process, in a session (and process group) of its own, its stdout and stderr
    appended to `log_path` (the task runtimes, and the dev stack's servers), a file its owner
    only may read (a task's log can hold what its Kafka client says of its settings)."""
    with os.fdopen(private_log(log_path), "ab") as log:
        return subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
            env=env,
        )
