"""A throwaway PostgreSQL cluster from Debian's package, for the test suite."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from supervisor.net import free_port


class PostgresError(RuntimeError):
    """PostgreSQL is missing or did not start."""


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not candidates:
        raise PostgresError(f"{name} not found; `make setup` installs Debian's postgresql package")
    return candidates[-1]


class LocalPostgres:
    """initdb + pg_ctl on a free loopback port. As root, the server runs as the postgres user."""

    user = "sluicegate"

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="sluicegate-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"

    def _run(self, *args: str) -> None:
        command = list(args)
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise PostgresError(f"{' '.join(args[:2])} failed: {result.stderr.strip()} {log}")

    def start(self) -> LocalPostgres:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            _bin("initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            self.user,
            "--no-sync",
            "-E",
            "UTF8",
        )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            _bin("pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "start",
        )
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
