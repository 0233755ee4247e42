"""Resolve the JVM jars Sluicegate runs with from Maven Central, into a cache outside the repo.

The bundles: a real Apache Kafka broker (KRaft) for `sluicegate kafka-local` and the tests,
Kafka's tools, the spark-sql-kafka connector matching the installed pyspark, and Iceberg's
Spark runtime with the JDBC drivers its catalog needs. Resolution uses the machine's
`mvn` with a settings file that sends every repository to Maven Central, so POMs that name
other mirrors cannot send it elsewhere.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "4.2.0"
LOG4J_VERSION = "2.25.3"
SCALA_BINARY = "2.13"
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
_COMPLETE = ".complete"

_SETTINGS_XML = f"""<settings>
  <mirrors>
    <mirror><id>central-only</id><mirrorOf>*</mirrorOf><url>{MAVEN_CENTRAL}</url></mirror>
  </mirrors>
</settings>
"""


class JarsMissingError(RuntimeError):
    """A bundle has not been resolved yet; `make setup` resolves it."""


@dataclass(frozen=True)
class JarBundle:
    name: str
    version: str
    coordinates: tuple[str, ...]
    # Jars whose artifact id is in this set are left out (the runtime already ships them).
    provided: frozenset[str] = frozenset()

    def directory(self, cache: Path) -> Path:
        return cache / f"{self.name}-{self.version}"

    def pom(self) -> str:
        deps = []
        for coordinate in self.coordinates:
            group, artifact, version = coordinate.split(":")
            deps.append(
                f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                f"<version>{version}</version></dependency>"
            )
        body = "\n".join(deps)
        return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.sluicegate.resolve</groupId>
  <artifactId>{self.name}</artifactId>
  <version>{self.version}</version>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def kafka_broker_bundle() -> JarBundle:
    return JarBundle(
        name="kafka-broker",
        version=KAFKA_VERSION,
        coordinates=(
            f"org.apache.kafka:kafka_{SCALA_BINARY}:{KAFKA_VERSION}",
            # Kafka logs through slf4j 1.x; this binds it to the log4j2 core Kafka ships.
            f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}",
        ),
    )


def kafka_tools_bundle() -> JarBundle:
    """Kafka's command-line tools (kafka-consumer-groups.sh's ConsumerGroupCommand), beside
    the broker's jars: what an operator runs against the broker."""
    return JarBundle(
        name="kafka-tools",
        version=KAFKA_VERSION,
        coordinates=(f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}",),
    )


def installed_spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def pyspark_jar_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _artifact_id(jar: Path) -> str:
    stem = jar.name.removesuffix(".jar")
    parts = stem.split("-")
    for index, part in enumerate(parts):
        if part[:1].isdigit():
            return "-".join(parts[:index])
    return stem


def spark_kafka_bundle() -> JarBundle:
    version = installed_spark_version()
    provided = frozenset(_artifact_id(jar) for jar in pyspark_jar_dir().glob("*.jar"))
    return JarBundle(
        name="spark-sql-kafka",
        version=version,
        coordinates=(f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{version}",),
        provided=provided,
    )


ICEBERG_VERSION = "1.10.1"  # the newest with a runtime for Spark 4.0 that resolved here
SQLITE_JDBC_VERSION = "3.51.1.0"
POSTGRES_JDBC_VERSION = "42.7.8"


def iceberg_spark_bundle() -> JarBundle:
    """Iceberg's Spark runtime, its AWS bundle (S3FileIO) and the JDBC drivers of the metadata
    DBs: what a user's Spark session needs to read the datasources' tables through Iceberg's
    JdbcCatalog on the metadata DB (`sluicegate sql`, the tests' readers)."""
    version = installed_spark_version()
    spark_minor = ".".join(version.split(".")[:2])
    return JarBundle(
        name="iceberg-spark",
        version=f"{ICEBERG_VERSION}-spark{spark_minor}",
        coordinates=(
            f"org.apache.iceberg:iceberg-spark-runtime-{spark_minor}_{SCALA_BINARY}:"
            f"{ICEBERG_VERSION}",
            f"org.apache.iceberg:iceberg-aws-bundle:{ICEBERG_VERSION}",
            f"org.xerial:sqlite-jdbc:{SQLITE_JDBC_VERSION}",
            f"org.postgresql:postgresql:{POSTGRES_JDBC_VERSION}",
        ),
        provided=frozenset(_artifact_id(jar) for jar in pyspark_jar_dir().glob("*.jar")),
    )


def is_resolved(bundle: JarBundle, cache: Path) -> bool:
    return (bundle.directory(cache) / _COMPLETE).exists()


def resolve(bundle: JarBundle, cache: Path, mvn: str = "mvn") -> Path:
    """Resolve a bundle into the cache (a no-op when it is already there); return its folder."""
    target = bundle.directory(cache)
    if is_resolved(bundle, cache):
        return target
    if shutil.which(mvn) is None:
        raise JarsMissingError(f"`{mvn}` is not on PATH; install Maven to resolve {bundle.name}")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{bundle.name}-") as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(bundle.pom())
        (work / "settings.xml").write_text(_SETTINGS_XML)
        out = work / "jars"
        command = [
            mvn,
            "-q",
            "-B",
            "-s",
            str(work / "settings.xml"),
            "-f",
            str(work / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={out}",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise JarsMissingError(f"resolving {bundle.name} {bundle.version} failed:\n{tail}")
        for jar in out.glob("*.jar"):
            if _artifact_id(jar) in bundle.provided:
                jar.unlink()
        (out / _COMPLETE).write_text("\n".join(bundle.coordinates) + "\n")
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)
    return target


def jars(bundle: JarBundle, cache: Path) -> list[Path]:
    """The resolved jars of a bundle, or a clear error telling how to get them."""
    if not is_resolved(bundle, cache):
        raise JarsMissingError(
            f"{bundle.name} {bundle.version} is not resolved in {cache}; run `make setup`"
        )
    return sorted(bundle.directory(cache).glob("*.jar"))
