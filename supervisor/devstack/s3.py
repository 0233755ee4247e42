"""A real S3-compatible server on loopback for dev and tests: SeaweedFS (`weed mini`: master,
volume, filer and S3 gateway in one process), built from its Go module by `make setup`
(`python -m supervisor.devstack.s3 install`) into the cache beside the jars. Used by
`sluicegate s3-local` and the tests of S3 deep storage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from supervisor.devstack.server import ServerProcess
from supervisor.net import free_port
from tasks.storage import Storage, StorageError

HOST = "127.0.0.1"
MODULE = "github.com/seaweedfs/seaweedfs"
VERSION = "v0.0.0-20261109003541-7506e5f91cd6"  # SeaweedFS 4.53 (Apache-2.0)
DEFAULT_ACCESS_KEY = "sluicegate"
DEFAULT_SECRET_KEY = "sluicegate-dev-secret"


class S3Error(RuntimeError):
    """The server is not installed, or did not start."""


def binary(cache: Path | None = None) -> Path:
    from supervisor.settings import default_jar_cache

    root = (cache or default_jar_cache()).parent / "bin"
    return root / f"weed-{VERSION.rsplit('-', 1)[-1]}"


def install(cache: Path | None = None) -> Path:
    """Build the pinned SeaweedFS from the Go module proxy once; the binary's path. (`go
    install module@version` refuses modules with replace directives, SeaweedFS's among them:
    the module is downloaded and built in its own directory, where they apply.)"""
    target = binary(cache)
    if target.exists():
        return target
    go = shutil.which("go")
    if go is None:
        raise S3Error("go not found: SeaweedFS is built from its Go module (install Go 1.26+)")
    env = {**os.environ, "GOFLAGS": "-mod=mod"}
    print(f"building SeaweedFS {VERSION} from the Go module proxy (a few minutes, once)")
    download = subprocess.run(
        [go, "mod", "download", "-json", f"{MODULE}@{VERSION}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if download.returncode != 0:
        raise S3Error(f"go mod download {MODULE}@{VERSION} failed: {_tail(download.stdout)}")
    source = Path(json.loads(download.stdout)["Dir"])
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        built = Path(scratch) / "weed"
        build = subprocess.run(
            [go, "build", "-o", str(built), "./weed"],
            cwd=source,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if build.returncode != 0:
            raise S3Error(f"go build of SeaweedFS failed: {_tail(build.stderr)}")
        built.replace(target)  # whole, or not at all: a later run never sees half a binary
    return target


def _tail(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def credentials(environ: dict[str, str] | None = None) -> tuple[str, str, bool]:
    """The access key and secret (from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY), and whether
    they are the built-in defaults (both unset)."""
    env = os.environ if environ is None else environ
    access, secret = env.get("AWS_ACCESS_KEY_ID", ""), env.get("AWS_SECRET_ACCESS_KEY", "")
    if not access and not secret:
        return DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY, True
    if not access or not secret:
        raise S3Error("set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither")
    return access, secret, False


class LocalS3(ServerProcess):
    """`weed mini` on loopback: the S3 gateway on `port` (0: a free one), every other port of
    it free ones, the bucket made at start, only the given credentials accepted. `stop` ends
    it; its data stays in `data_dir` for the next start."""

    def __init__(
        self,
        data_dir: Path,
        bucket: str,
        access_key: str = DEFAULT_ACCESS_KEY,
        secret_key: str = DEFAULT_SECRET_KEY,
        port: int = 0,
        host: str = HOST,
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.host = host  # the address it listens on
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.data_dir / "server.log"

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def environment(self) -> dict[str, str]:
        """What a Sluicegate process needs to use this server as deep storage."""
        return {
            "SLUICEGATE_S3_ENDPOINT": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }

    def storage(self, prefix: str = "") -> Storage:
        return Storage(
            root=prefix.strip("/"),
            bucket=self.bucket,
            endpoint=self.endpoint,
            access_key=self.access_key,
            secret_key=self.secret_key,
        )

    def start(self, timeout: float = 60.0) -> LocalS3:
        weed = binary()
        if not weed.exists():
            raise S3Error(f"SeaweedFS is not built ({weed}); `make setup` builds it")
        try:
            (self.data_dir / "data").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise S3Error(f"cannot make the data directory: {exc.strerror or exc}") from None
        ports = {
            name: str(free_port())
            for name in (
                "s3.port.grpc",
                "master.port",
                "master.port.grpc",
                "volume.port",
                "volume.port.grpc",
                "filer.port",
                "filer.port.grpc",
                "admin.port",
                "admin.port.grpc",
            )
        }
        command = [
            str(weed),
            "mini",
            f"-dir={self.data_dir / 'data'}",
            f"-ip={self.host}",
            f"-ip.bind={self.host}",
            f"-s3.port={self.port}",
            *[f"-{name}={port}" for name, port in ports.items()],
            f"-bucket={self.bucket}",
            "-webdav=false",
            "-admin.ui=false",
            "-admin.port.legacy=0",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-s3.iam=false",
            "-master.telemetry=false",
        ]
        env = {
            **os.environ,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }
        process = self._spawn(command, self.log, self.data_dir, env)
        deadline = time.monotonic() + timeout
        probe = self.storage("_sluicegate_started")
        last = "not answering"
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise S3Error(
                    f"SeaweedFS exited with code {process.returncode}: "
                    f"{_tail(self.log.read_text(errors='replace'))} (log: {self.log})"
                )
            try:
                probe.check()
                return self
            except StorageError as exc:
                last = str(exc)
            time.sleep(0.3)
        self.stop()
        raise S3Error(f"SeaweedFS did not start in time: {last} (log: {self.log})")


if __name__ == "__main__":  # `make setup`: python -m supervisor.devstack.s3 install
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m supervisor.devstack.s3 install")
    try:
        print(f"SeaweedFS: {install()}")
    except S3Error as exc:
        sys.exit(f"error: {exc}")
