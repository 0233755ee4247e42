"""The training run of the driver's JVM class archive (class_archive.py): a driver that
dumps the classes it loaded when it exits, run as `python -m tasks.spark.training ARCHIVE
JAR_CACHE` in a process of its own."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasks.spark.class_archive import BUILD_TIMEOUT_S
from tasks.spark.session import build_session


def train(archive: Path, jar_cache: Path) -> None:
    """Start a driver that dumps its classes at exit; run Python workers over Arrow, JSON
    parsing, a roll-up, Parquet written and read (no Kafka: there is no broker here); stop it
    and wait for its JVM to exit, which is when the archive is written."""
    with tempfile.TemporaryDirectory() as work:
        spark = build_session(
            jar_cache,
            master="local[2]",
            app_name="sluicegate-class-archive",
            conf={"spark.driver.extraJavaOptions": f'"-XX:ArchiveClassesAtExit={archive}"'},
            use_class_archive=False,  # the JVM cannot dump over an archive it maps
        )
        gateway: Any = spark.sparkContext._gateway
        jvm_process = gateway.proc  # spark-submit execs the JVM: this is the driver itself
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
        code = jvm_process.wait(timeout=BUILD_TIMEOUT_S)
        if code != 0:
            raise RuntimeError(f"the training driver's JVM exited with {code}")


def _passthrough(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


if __name__ == "__main__":
    train(Path(sys.argv[1]), Path(sys.argv[2]))
