"""A Spark application's scratch folder, its own and gone with it: block managers, fetched
files and shuffle spills (SPARK_LOCAL_DIRS) and the driver JVM's temporary files
(java.io.tmpdir) go into `sluicegate-scratch-<pid>`, under the operator's SPARK_LOCAL_DIRS if
set, else under the runtime's work directory. It is removed when the process ends, and a
folder whose process died (a SIGKILL) when the next one claims its place."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tasks.procfs import STATE, stat_fields

PREFIX = "sluicegate-scratch-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return stat_fields(pid)[STATE] not in ("Z", "X")
    except OSError:
        return True


def claim(base: Path) -> Path:
    """This process's scratch folder (made), after removing those of dead processes there;
    SPARK_LOCAL_DIRS points at it from now on (the driver JVM inherits it)."""
    given = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    root = Path(given) if given and not Path(given).name.startswith(PREFIX) else base
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob(f"{PREFIX}*"):
        suffix = old.name.removeprefix(PREFIX)
        if suffix.isdigit() and int(suffix) != os.getpid() and not _alive(int(suffix)):
            shutil.rmtree(old, ignore_errors=True)
    mine = root / f"{PREFIX}{os.getpid()}"
    mine.mkdir(exist_ok=True)
    os.environ["SPARK_LOCAL_DIRS"] = str(mine)
    return mine


def java_options(folder: Path) -> str:
    """The driver JVM's option that puts its temporary files there."""
    return f"-Djava.io.tmpdir={folder}"


def release(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
