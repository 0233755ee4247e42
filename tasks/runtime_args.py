"""The arguments both task runtimes take, one definition for the overlord that starts them
and the processes that parse them: `python -m tasks` (a process per task) and `python -m
tasks.host_app` (a host's shared application). What only one runtime takes it adds itself."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RuntimeArgs:
    overlord: str  # where its tasks publish (the leader's URL; they follow redirects)
    token_file: Path  # the token its callers must show (the task's, or the application's)
    port: int  # where it serves its API
    deep_storage: str  # a directory or s3://bucket/prefix
    jar_cache: Path
    host: str = "127.0.0.1"
    master: str = "local[*]"
    cores: int = 1  # on a spark:// master: the application's cores
    executor_memory: str = "1g"  # on a spark:// master: memory per executor
    driver_memory: str = "1g"  # the driver JVM's heap
    fixed_heap: bool = False  # the heap taken whole at start (the shared application only)
    malloc_arenas: int = 0  # the driver JVM's glibc malloc arenas at most (0: glibc's own)
    tls_cert: Path | None = None  # serve over TLS (PEM)
    tls_key: Path | None = None
    log_format: str = "text"
    # stop every task unpublished and exit after this long with no call from an overlord
    # (tasks/runtime/orphan.py; 0: never)
    orphan_timeout_s: float = 600.0

    def argv(self) -> list[str]:
        served = (
            ["--tls-cert", str(self.tls_cert), "--tls-key", str(self.tls_key)]
            if self.tls_cert is not None and self.tls_key is not None
            else []
        )
        return [
            *("--overlord", self.overlord, "--token-file", str(self.token_file)),
            *("--host", self.host, "--port", str(self.port)),
            *("--deep-storage", self.deep_storage, "--jar-cache", str(self.jar_cache)),
            *("--master", self.master, "--cores", str(self.cores)),
            *("--executor-memory", self.executor_memory, "--log-format", self.log_format),
            *("--orphan-timeout-s", str(self.orphan_timeout_s)),
            *("--driver-memory", self.driver_memory),
            *(["--fixed-heap"] if self.fixed_heap else []),
            *("--malloc-arenas", str(self.malloc_arenas)),
            *served,
        ]

    @classmethod
    def of(cls, namespace: argparse.Namespace) -> RuntimeArgs:
        """What a runtime's parsed arguments hold of these."""
        return cls(**{name: getattr(namespace, name) for name in cls.__dataclass_fields__})


def parser(prog: str) -> argparse.ArgumentParser:
    """A parser of RuntimeArgs' options (its defaults are RuntimeArgs'); a runtime adds its
    own."""
    found = argparse.ArgumentParser(prog=prog)
    default = {name: f.default for name, f in RuntimeArgs.__dataclass_fields__.items()}
    found.add_argument("--overlord", required=True)
    found.add_argument("--token-file", type=Path, required=True)
    found.add_argument("--host", default=default["host"])
    found.add_argument("--port", type=int, required=True)
    found.add_argument("--deep-storage", required=True, help="a directory or s3://bucket/prefix")
    found.add_argument("--jar-cache", type=Path, required=True)
    found.add_argument("--master", default=default["master"])
    found.add_argument(
        "--cores", type=int, default=default["cores"], help="on a spark:// master: its cores"
    )
    found.add_argument(
        "--executor-memory",
        default=default["executor_memory"],
        help="on a spark:// master: memory per executor",
    )
    found.add_argument(
        "--driver-memory", default=default["driver_memory"], help="the driver JVM's heap"
    )
    found.add_argument(
        "--fixed-heap",
        action="store_true",
        help="take the whole heap at start (-Xms as -Xmx, its pages touched)",
    )
    found.add_argument(
        "--malloc-arenas",
        type=int,
        default=default["malloc_arenas"],
        help="the driver JVM's malloc arenas at most (MALLOC_ARENA_MAX; 0: glibc's own)",
    )
    found.add_argument("--tls-cert", type=Path, help="serve over TLS (PEM)")
    found.add_argument("--tls-key", type=Path)
    found.add_argument("--log-format", choices=("text", "json"), default=default["log_format"])
    found.add_argument(
        "--orphan-timeout-s",
        type=float,
        default=default["orphan_timeout_s"],
        help="stop every task unpublished and exit after this long with no overlord's call",
    )
    return found
