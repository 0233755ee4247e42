"""A local PostgreSQL from Debian's package: a throwaway cluster for the test suite, or a kept
one in a data directory (`sluicegate postgres-local`, the metadata DB of an HA set-up)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
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


def _complaint(line: str) -> bool:
    return "FATAL" in line or "ERROR" in line


class LocalPostgres:
    """initdb + pg_ctl on a loopback port. As root, the server runs as the postgres user.

    Without `data_dir`: a throwaway cluster in a temporary directory, on a free port, with
    durability off (fsync), removed by `stop`. With one: the cluster lives in
    `data_dir/pgdata` (made by the first start, reused by the next), its log and socket beside
    it, with PostgreSQL's durable defaults; `stop` keeps it."""

    user = "sluicegate"

    def __init__(
        self,
        data_dir: Path | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        network: str | None = None,
    ) -> None:
        self.port = port or free_port()
        self.host = host  # the address it listens on
        # a network (CIDR) whose clients it trusts besides loopback ones: a test's own private
        # addresses (bench/chaos.py's network namespaces), never a real interface's
        self.network = network
        self.kept = data_dir is not None
        if data_dir is None:
            self.root = Path(tempfile.mkdtemp(prefix="sluicegate-pg-"))
        else:
            self.root = data_dir.resolve()
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise PostgresError(f"cannot make the data directory {data_dir}: {exc}") from None
        self.data = self.root / ("pgdata" if self.kept else "data")
        self.log = self.root / "server.log"
        self.started = False  # by this object: stop() never stops another's server

    def _run(self, *args: str) -> None:
        command = list(args)
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        began = self.log.stat().st_size if self.log.exists() else 0
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise PostgresError(
                f"{Path(args[0]).name} {args[-1]} failed: {self._reason(result.stderr, began)} "
                f"(log: {self.log})"
            )

    def _reason(self, stderr: str, since: int) -> str:
        """The server's own complaint from this attempt's part of the log (its last FATAL or
        ERROR line), else the command's first line of output."""
        if self.log.exists():
            with self.log.open("rb") as log:
                log.seek(since)
                text = log.read().decode(errors="replace")
            lines = [line.strip() for line in text.splitlines() if _complaint(line)]
            if lines:
                return lines[-1]
        return (stderr.strip().splitlines() or ["no output"])[0]

    def start(self) -> LocalPostgres:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            self._reachable()
        if not (self.data / "PG_VERSION").exists():
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
        if self.network is not None:
            self._trust(self.network)
        options = f"-p {self.port} -k {self.root} -c listen_addresses={self.host}"
        if not self.kept:
            options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
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
        self.started = True
        return self

    def _trust(self, network: str) -> None:
        """Let `network`'s clients in without a password, as initdb's `-A trust` lets loopback
        ones (once: a kept cluster keeps the line)."""
        hba = self.data / "pg_hba.conf"
        line = f"host all all {network} trust"
        if line not in hba.read_text().splitlines():
            with hba.open("a") as conf:
                conf.write(line + "\n")

    def _reachable(self) -> None:
        """(as root) The postgres user must reach the directory: every folder above it must let
        others through (a data directory under /root does not)."""
        check = ["runuser", "-u", "postgres", "--", "test", "-w", str(self.root)]
        if subprocess.run(check, capture_output=True, check=False).returncode != 0:
            raise PostgresError(
                f"the postgres user cannot write {self.root} (as root, the server runs as "
                "postgres): choose a directory every folder above which others may enter"
            )

    def running(self) -> bool:
        """Whether the server is up (its postmaster.pid names a live process)."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return False
        return True

    def wait(self, stopping: list[int], poll_s: float = 0.5) -> bool:
        """Until `stopping` has an entry (a signal handler appends one) or the server exits;
        whether it is still up."""
        while not stopping and self.running():
            time.sleep(poll_s)
        return self.running()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"

    def public_url(self, database: str = "postgres") -> str:
        """The URL to hand `sluicegate serve --metadata-url`."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(
            f"host={self.host} port={self.port} user={self.user} dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def crash(self) -> None:
        """Stop the server at once, as a crash would (`pg_ctl -m immediate`: no checkpoint,
        sessions cut; the next start recovers from the WAL); its data stays for `start`."""
        if self.running():
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        """A kept cluster shuts down cleanly (fast: sessions are ended, data is flushed); a
        throwaway one is stopped at once and removed."""
        if self.kept:
            if self.started and self.running():
                self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
            return
        try:
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
