"""The Spark driver's class archive (tasks/spark/class_archive.py): built once from a training
driver, then mapped by every driver build_session starts, on the real JVM."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tasks.jars import JarsMissingError
from tasks.spark import class_archive

DRIVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tasks.spark import class_archive
    from tasks.spark.session import build_session

    cache, log = Path(sys.argv[1]), sys.argv[2]
    if len(sys.argv) > 3:
        class_archive.FOLDER = Path(sys.argv[3])
    spark = build_session(
        cache,
        master="local[1]",
        conf={"spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={log}"},
    )
    assert spark.range(10).count() == 10
    spark.stop()
    """
)


def _sources(cache: Path, tmp_path: Path, *folder: Path) -> dict[str, str]:
    """Where a driver built by build_session loaded SparkContext and Dataset from."""
    log = tmp_path / "classload.log"
    command = [sys.executable, "-c", DRIVER, str(cache), str(log), *map(str, folder)]
    subprocess.run(command, check=True, timeout=300)
    found = {}
    for line in log.read_text().splitlines():
        for name in ("org.apache.spark.SparkContext ", "org.apache.spark.sql.classic.Dataset "):
            if name in line:
                found[name.strip()] = line.split("source: ", 1)[-1]
    return found


def test_a_driver_loads_spark_from_the_archive_built_for_it(
    jar_cache: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "archive"
    assert class_archive.java_options(jar_cache, folder) == ""
    without = _sources(jar_cache, tmp_path, folder)
    assert len(without) == 2
    assert not any("shared objects file" in source for source in without.values()), without

    folder.mkdir()
    stale = folder / "spark-0.0.0-earlier.jsa"
    stale.write_bytes(b"an archive of this installation before a change")
    path = class_archive.archive_path(jar_cache, folder)
    assert path is not None
    path.write_bytes(bytes(4096))  # a JVM killed while dumping: its header never written
    assert not class_archive.is_complete(path)

    built = class_archive.build(jar_cache, folder, timeout=300)
    assert built is not None and built[0] == path
    assert class_archive.is_complete(path)
    assert not stale.exists()
    assert class_archive.build(jar_cache, folder) == (path, 0.0)  # idempotent
    assert f"-XX:SharedArchiveFile={path}" in class_archive.java_options(jar_cache, folder)

    with_archive = _sources(jar_cache, tmp_path, folder)
    assert set(with_archive) == set(without)
    assert all(s == "shared objects file (top)" for s in with_archive.values()), with_archive
    path.unlink()  # ~160 MB that pytest's kept temp directories need not hold


def test_nothing_is_built_for_a_connector_not_resolved(jar_cache: Path, tmp_path: Path) -> None:
    unresolved = tmp_path / "jars"
    (unresolved / "spark-sql-kafka-0.0.0").mkdir(parents=True)
    folder = tmp_path / "archive"
    with pytest.raises(JarsMissingError):
        class_archive.build(unresolved, folder)
    assert class_archive.java_options(unresolved, folder) == ""


def test_a_training_run_over_its_time_is_stopped(jar_cache: Path, tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    with pytest.raises(RuntimeError, match=r"took over 1 s; see .*training\.log"):
        class_archive.build(jar_cache, folder, timeout=1)
    path = class_archive.archive_path(jar_cache, folder)
    assert path is not None and not path.exists()
    assert list(folder.glob("tmp*")) == []  # the scratch directory went with its JVM


def test_setup_built_the_archive_every_driver_here_maps(jar_cache: Path, tmp_path: Path) -> None:
    """`make setup` (resolve-jars) leaves this installation's archive, and build_session's
    drivers load Spark from it. Setup goes past a failed build; this is where CI catches one."""
    path = class_archive.archive_path(jar_cache)
    assert path is not None and path.is_file()
    sources = _sources(jar_cache, tmp_path)
    assert len(sources) == 2
    assert all(s == "shared objects file (top)" for s in sources.values()), sources
