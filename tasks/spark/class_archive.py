"""A JVM class archive (JDK class data sharing) for the Spark driver.

A cold Spark driver spends most of its first seconds loading and verifying classes: on this
2-core machine the session takes ~3.9 s and its first job ~2.0 s. A dynamic CDS archive of
the classes a driver loads, built once by `sluicegate resolve-jars` (`make setup`), cuts those
to ~2.4 s and ~1.1 s for every task process, host application and batch job started
afterwards.

The archive lives with the Python installation (`<sys.prefix>/share/sluicegate`, so it goes
with the venv) and is named for what the JVM checks it against (the JVM and its base archive,
the size and mtime of every jar on the driver's classpath): a changed installation finds no
archive and starts as before until the next `resolve-jars` builds one. Only an archive whose
header was written is built or kept. Deleting the folder turns the archive off.

    python -m tasks.spark.class_archive ARCHIVE JAR_CACHE   # the training run build() starts
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tasks.jars import (
    installed_spark_version,
    jars,
    pyspark_jar_dir,
    spark_kafka_bundle,
)

FOLDER = Path(sys.prefix) / "share" / "sluicegate" / "jvm-class-archive"
BUILD_TIMEOUT_S = 600.0
DYNAMIC_MAGIC = 0xF00BABA8  # the first word of a complete JDK dynamic archive (its header)


def archive_path(jar_cache: Path, folder: Path | None = None) -> Path | None:
    """Where this installation's archive lives; None without a java on PATH or JAVA_HOME.
    Its name covers what the JVM checks an archive against: the JVM and its base archive, and
    every jar on the driver's classpath (pip does not keep a jar's mtime, so a reinstall of
    the same pyspark is a change too)."""
    java = _java()
    if java is None:
        return None
    home = java.parent.parent
    pyspark_jars = sorted(pyspark_jar_dir().glob("*.jar"))
    files = [java, home / "lib" / "server" / "libjvm.so", home / "lib" / "server" / "classes.jsa"]
    files += pyspark_jars + jars(spark_kafka_bundle(), jar_cache)
    identity = "\n".join(_stamp(f) for f in files)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return (folder or FOLDER) / f"spark-{installed_spark_version()}-{digest}.jsa"


def java_options(jar_cache: Path, folder: Path | None = None) -> str:
    """The driver's JVM options that map the archive, or "" when there is none."""
    try:
        path = archive_path(jar_cache, folder)
    except Exception:  # jars not resolved yet: the session itself will say so
        return ""
    if path is None or not path.is_file():
        return ""
    # quoted for Spark's option parser; an archive the JVM rejects is only noted at info level
    return f'"-XX:SharedArchiveFile={path}" -Xlog:cds=off -Xlog:cds+dynamic=off'


def build(
    jar_cache: Path, folder: Path | None = None, timeout: float = BUILD_TIMEOUT_S
) -> tuple[Path, float] | None:
    """Build the archive unless a complete one exists: a training driver runs the kinds of
    Spark jobs tasks run, and its JVM writes the classes it loaded as it exits. (path, seconds
    taken); None without java. The folder's other archives (this installation before a
    change) are removed. A failed training run raises, its output kept in the folder's
    `training.log`."""
    path = archive_path(jar_cache, folder)
    if path is None:
        return None
    if is_complete(path):
        return path, 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.parent):
        if is_complete(path):  # another process built it meanwhile
            return path, 0.0
        began = time.monotonic()
        with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
            partial = Path(scratch) / path.name
            _run_training(partial, jar_cache, path.parent / "training.log", timeout)
            if not is_complete(partial):
                raise RuntimeError(f"the training driver wrote no complete archive at {partial}")
            for old in path.parent.glob("*.jsa"):
                old.unlink(missing_ok=True)
            partial.replace(path)
    return path, time.monotonic() - began


def is_complete(path: Path) -> bool:
    """Whether `path` holds a dynamic archive whose header was written (the JVM writes the
    header last; one killed while dumping leaves it zeroed, and mapping that would turn class
    sharing off altogether)."""
    try:
        with path.open("rb") as archive:
            head = archive.read(4)
    except OSError:
        return False
    return len(head) == 4 and int.from_bytes(head, sys.byteorder) == DYNAMIC_MAGIC


def _run_training(partial: Path, jar_cache: Path, log: Path, timeout: float) -> None:
    """The training driver in a process group of its own, so that a timeout also stops its
    JVM before the scratch directory goes."""
    command = [sys.executable, "-m", "tasks.spark.training", str(partial), str(jar_cache)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            late = f"the training driver took over {timeout:.0f} s; see {log}"
            raise RuntimeError(late) from None
    if code != 0:
        raise RuntimeError(f"the training driver exited with {code}; see {log}")


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _stamp(file: Path) -> str:
    try:
        stat = file.stat()
    except OSError:
        return f"{file} -"
    return f"{file} {stat.st_size} {stat.st_mtime_ns}"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if found is None or not Path(found).exists():
        return None
    return Path(found).resolve()
