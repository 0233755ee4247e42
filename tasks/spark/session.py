"""A SparkSession with the resolved spark-sql-kafka connector on its classpath."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tasks.jars import jars, spark_kafka_bundle
from tasks.spark import class_archive


def cluster_conf(master: str, host: str, cores: int, executor_memory: str) -> dict[str, str]:
    """What a task's application asks of a standalone cluster (`spark://`): a bounded share of
    its cores (an application takes all that are free otherwise, and the next task waits), one
    executor's worth each, and a driver address the executors can reach (the task's host).
    Nothing for local masters."""
    if not master.startswith("spark://"):
        return {}
    return {
        "spark.cores.max": str(cores),
        "spark.executor.cores": str(cores),
        "spark.executor.memory": executor_memory,
        "spark.driver.host": host,
        "spark.driver.bindAddress": host,
    }


def driver_conf(memory: str, fixed_heap: bool, java_options: str) -> dict[str, str]:
    """The driver JVM's heap (`memory`: Spark's spark.driver.memory, its -Xmx) and options
    (`java_options`, then build_session's own). With `fixed_heap` it has its whole heap from
    the start: -Xms too, each page touched as the JVM starts, so its resident memory does not
    climb toward the bound as the heap grows."""
    java = [java_options, f"-Xms{memory} -XX:+AlwaysPreTouch" if fixed_heap else ""]
    return {
        "spark.driver.memory": memory,
        "spark.driver.extraJavaOptions": " ".join(option for option in java if option),
    }


def limit_arenas(arenas: int) -> None:
    """The driver JVM (started after this, with this process's environment) makes at most
    `arenas` glibc malloc arenas (MALLOC_ARENA_MAX; 0, or the variable already set by the
    operator: as it is). This process's own arenas are not changed: glibc read the variable
    when it started."""
    if arenas > 0:
        os.environ.setdefault("MALLOC_ARENA_MAX", str(arenas))


# The secret a standalone cluster's master, workers and applications share (Spark's standalone
# mode has one per cluster, not per application), from the operator's environment
CLUSTER_SECRET = "SLUICEGATE_SPARK_SECRET"


def driver_security(master: str) -> dict[str, str]:
    """Who may talk to a driver. A local master's talks to no one but its own process: its RPC
    and block manager listen on loopback (Spark picks the machine's address otherwise), and
    take only peers that know the application's secret (with spark.authenticate, Spark makes
    one per application in local mode). A cluster's driver authenticates with the cluster's
    secret when the operator gives one (CLUSTER_SECRET; given to the JVM through the gateway,
    not on a command line)."""
    if master.startswith("local"):
        return {
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.authenticate": "true",
        }
    secret = os.environ.get(CLUSTER_SECRET)
    if master.startswith("spark://") and secret:
        return {"spark.authenticate": "true", "spark.authenticate.secret": secret}
    return {}


def build_session(
    jar_cache: Path,
    master: str = "local[*]",
    app_name: str = "sluicegate",
    conf: dict[str, str] | None = None,
    use_class_archive: bool = True,
) -> Any:
    """Start (or reuse) a SparkSession that can read Kafka; no download happens at run time.
    Its driver maps the installation's class archive when there is one
    (tasks/spark/class_archive.py; not when training one)."""
    from pyspark.sql import SparkSession

    # Python workers must run the driver's interpreter (the venv), not whatever python3 is on
    # PATH; pyspark reads this variable when it creates the SparkContext.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    conf = dict(conf or {})
    # the caller's jars (Iceberg's runtime for a reader, supervisor/lake/readers.py) join ours
    given = [jar for jar in conf.pop("spark.jars", "").split(",") if jar]
    classpath = ",".join([*(str(jar) for jar in jars(spark_kafka_bundle(), jar_cache)), *given])
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", classpath)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # its bars garble the task's log
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        # a kafka inputFormat adds key/timestamp/header fields; they win over same-named ones
        .config("spark.sql.mapKeyDedupPolicy", "LAST_WIN")
        # A batch's row counts ride along with its write (Dataset.observe, tasks/rows/pipeline.py).
        # When no row of a batch is ingested (all filtered out or unparseable), adaptive
        # execution swapped the plan past the counted stage for an empty one, and the counts
        # never came: the task waited for them forever.
        .config(
            "spark.sql.adaptive.optimizer.excludedRules",
            "org.apache.spark.sql.execution.adaptive.AQEPropagateEmptyRelation",
        )
        # a schemaless batch's cache lives for two scans (tasks/rows/pipeline.py): compressing it
        # costs more CPU than it saves
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
    )
    conf = {**driver_security(master), **conf}
    # The driver JVM's options: ours (the class archive, tasks/spark/class_archive.py), then
    # the caller's.
    java = ["-Dlog4j2.level=WARN"]
    if use_class_archive:
        java.append(class_archive.java_options(jar_cache))
    java.append(conf.pop("spark.driver.extraJavaOptions", ""))
    builder = builder.config("spark.driver.extraJavaOptions", " ".join(o for o in java if o))
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    # Every read names this process's consumer group (tasks/reading/reader.py: GROUP_ID, so
    # consumers are reused) and the Kafka source warns of it on every batch: four lines a second.
    jvm: Any = session.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.kafka010.KafkaSourceProvider",
        jvm.org.apache.logging.log4j.Level.ERROR,
    )
    return session
