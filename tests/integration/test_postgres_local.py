"""`sluicegate postgres-local`: a real PostgreSQL (Debian's package) that keeps its data between
runs, serves the metadata schema, refuses a second server on the same data and stops on
SIGINT."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from supervisor.db.engine import make_engine, migrate
from supervisor.net import free_port


def _sluicegate() -> str:
    return str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # not pytest's tmp_path: as root the server runs as postgres, which must reach the folder
    root = Path(tempfile.mkdtemp(prefix="sluicegate-pg-cli-"))
    root.chmod(0o755)
    yield root / "pg"
    shutil.rmtree(root, ignore_errors=True)


def _start(data_dir: Path, port: int) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [_sluicegate(), "postgres-local", "--port", str(port), "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    ready = process.stdout.readline()
    if "ready at" not in ready:
        process.kill()
        pytest.fail(f"postgres-local did not start: {ready}{process.communicate()[0]}")
    url = ready.split("ready at ", 1)[1].split(" ", 1)[0]
    return process, url


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    rest = process.communicate(timeout=60)[0]
    assert process.returncode == 0, rest
    return rest


def test_postgres_local_keeps_the_metadata_db_between_runs(data_dir: Path) -> None:
    port = free_port()
    process, url = _start(data_dir, port)
    try:
        assert url == f"postgresql://sluicegate@127.0.0.1:{port}/postgres"
        engine = make_engine(url)  # as `sluicegate serve --metadata-url` takes it
        migrate(engine)
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE kept (note text)"))
            connection.execute(text("INSERT INTO kept VALUES ('written before the restart')"))
        engine.dispose()

        # a second server on the same data is refused, in one line, and the first goes on
        second = subprocess.run(
            [
                _sluicegate(),
                "postgres-local",
                "--port",
                str(free_port()),
                "--data-dir",
                str(data_dir),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 1
        assert (
            second.stderr.startswith("error: pg_ctl start failed")
            and second.stderr.count("\n") == 1
        ), second.stderr
        assert process.poll() is None
    finally:
        rest = _stop(process)
    assert "PostgreSQL stopped" in rest

    process, url = _start(data_dir, free_port())  # the same data, on another port
    try:
        engine = make_engine(url)
        assert "supervisor_specs" in inspect(engine).get_table_names()
        with engine.connect() as connection:
            kept = connection.execute(text("SELECT note FROM kept")).scalars().all()
        engine.dispose()
        assert kept == ["written before the restart"]
    finally:
        _stop(process)


def _refused(data_dir: Path) -> subprocess.CompletedProcess[str]:
    command = [_sluicegate(), "postgres-local", "--port", str(free_port())]
    return subprocess.run(
        [*command, "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=60
    )


def test_postgres_local_refuses_a_data_dir_the_server_cannot_use(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = _refused(blocker / "pg")
    assert result.returncode != 0
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr


def test_postgres_local_as_root_says_when_postgres_cannot_reach_the_data_dir(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root hands the server to the postgres user")
    private = Path(tempfile.mkdtemp(prefix="sluicegate-pg-private-"))  # mode 700, root's
    try:
        result = _refused(private / "pg")
    finally:
        shutil.rmtree(private, ignore_errors=True)
    assert result.returncode == 1
    assert result.stderr.startswith("error: the postgres user cannot write"), result.stderr
    assert result.stderr.count("\n") == 1
