"""A JVM class archive (JDK class data sharing) for the Spark driver.

A cold Spark driver spends most of its first seconds loading and verifying classes: on this
2-core machine the session takes ~3.9 s and its first job ~2.0 s. A dynamic CDS archive of
the classes a driver loads, built once by `sluicegate resolve-jars` (`make setup`), cuts those
to ~2.4 s and ~1.1 s for every task, standby and batch job started afterwards.

The archive lives with the Python installation (`<sys.prefix>/share/sluicegate`, so it goes
with the venv) and is named for everything its classes came from (the JVM, pyspark's jars, the
spark-sql-kafka jars): a changed installation finds no archive and starts as before until the
next `resolve-jars`. The JVM also checks an archive itself and ignores one that does not match
(its notices are silenced).

    python -m tasks.class_archive ARCHIVE   # the training run resolve-jars starts
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from supervisor.devstack.jars import (
    installed_spark_version,
    jars,
    pyspark_jar_dir,
    spark_kafka_bundle,
)

FOLDER = Path(sys.prefix) / "share" / "sluicegate" / "jvm-class-archive"
BUILD_TIMEOUT_S = 600.0


def archive_path(jar_cache: Path, folder: Path | None = None) -> Path | None:
    """Where this installation's archive lives; None without a java on PATH or JAVA_HOME."""
    java = _java()
    if java is None:
        return None
    stat = java.stat()
    kafka_jars = [str(jar) for jar in jars(spark_kafka_bundle(), jar_cache)]
    java_identity = [str(java), str(stat.st_size), str(stat.st_mtime_ns)]
    identity = "\n".join([*java_identity, str(pyspark_jar_dir()), *kafka_jars])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return (folder or FOLDER) / f"spark-{installed_spark_version()}-{digest}.jsa"


def java_options(jar_cache: Path, folder: Path | None = None) -> str:
    """The driver's JVM options that use the archive, or "" when there is none."""
    try:
        path = archive_path(jar_cache, folder)
    except Exception:  # jars not resolved yet: the session itself will say so
        return ""
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xlog:cds=off -Xlog:cds+dynamic=off"


def build(jar_cache: Path, folder: Path | None = None) -> tuple[Path, float] | None:
    """Build the archive unless it exists: a training driver runs the jobs tasks run, and its
    JVM writes the classes it loaded as it exits. (path, seconds taken); None without java.
    The folder's other archives (of this installation before a change) are removed."""
    path = archive_path(jar_cache, folder)
    if path is None:
        return None
    if path.is_file():
        return path, 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        partial = Path(scratch) / path.name
        subprocess.run(
            [sys.executable, "-m", "tasks.class_archive", str(partial), str(jar_cache)],
            check=True,
            timeout=BUILD_TIMEOUT_S,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        if not partial.is_file():
            raise RuntimeError(f"the training driver wrote no archive at {partial}")
        for old in path.parent.glob("*.jsa"):
            old.unlink()
        partial.replace(path)
    return path, time.monotonic() - began


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if found is None or not Path(found).exists():
        return None
    return Path(found).resolve()


def _train(archive: Path, jar_cache: Path) -> None:
    """Start a driver that dumps its classes at exit, run the kinds of jobs a task runs
    (Python workers over Arrow, JSON parsing, a roll-up, Parquet written and read), stop it
    and wait for its JVM to exit, which is when the archive is written."""
    from tasks.spark import build_session

    with tempfile.TemporaryDirectory() as work:
        spark = build_session(
            jar_cache,
            master="local[2]",
            app_name="sluicegate-class-archive",
            conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive}"},
            use_class_archive=False,  # the JVM cannot dump over an archive it maps
        )
        gateway: Any = spark.sparkContext._gateway
        jvm_process = gateway.proc
        records = spark.range(0, 1000, 1, 2).selectExpr(
            "to_json(named_struct('t', id, 'page', concat('p', id % 7))) AS value"
        )
        parsed = records.selectExpr("from_json(value, 'map<string,string>') AS fields")
        rolled = parsed.groupBy("fields.page").count()
        rolled.write.parquet(f"{work}/rolled")
        spark.read.parquet(f"{work}/rolled").collect()
        spark.range(0, 4, 1, 4).mapInArrow(_passthrough, "id long").collect()
        spark.stop()
        jvm_process.stdin.close()  # the gateway exits when its stdin closes
        jvm_process.wait(timeout=BUILD_TIMEOUT_S)


def _passthrough(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


if __name__ == "__main__":
    _train(Path(sys.argv[1]), Path(sys.argv[2]))
