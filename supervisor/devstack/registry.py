"""A real Confluent-compatible schema registry on loopback for dev and tests: Apicurio Registry
(Apache-2.0), its Quarkus application downloaded once from Maven Central by `make setup`
(`python -m supervisor.devstack.registry install`) into the cache beside the jars, and run on
the machine's Java with in-memory storage. Used by `sluicegate registry-local` and the tests
of Avro and Protobuf schemas read from a registry."""

from __future__ import annotations

import hashlib
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import httpx

from supervisor.devstack.server import ServerProcess
from supervisor.net import free_port

HOST = "127.0.0.1"
VERSION = "3.0.9"  # Apicurio Registry (Apache-2.0)
ARCHIVE_URL = (
    "https://repo1.maven.org/maven2/io/apicurio/apicurio-registry-app/"
    f"{VERSION}/apicurio-registry-app-{VERSION}-all.tar.gz"
)
ARCHIVE_SHA1 = "4deac01752711c32da5662e7b778b61c5e904746"
RUNNER = f"apicurio-registry-app-{VERSION}-runner.jar"
CCOMPAT = "/apis/ccompat/v7"  # Apicurio's Confluent-compatible API


class RegistryError(RuntimeError):
    """The registry is not installed, or did not start."""


def home(cache: Path | None = None) -> Path:
    """Where the unpacked application lives: beside the jar cache, as SeaweedFS does."""
    from supervisor.settings import default_jar_cache

    return (cache or default_jar_cache()).parent / "registry" / f"apicurio-registry-{VERSION}"


def install(cache: Path | None = None) -> Path:
    """Download the pinned Apicurio Registry from Maven Central and unpack it, once; its
    directory."""
    target = home(cache)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"downloading Apicurio Registry {VERSION} from Maven Central (109 MB, once)")
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        archive = Path(scratch) / "registry.tar.gz"
        _download(ARCHIVE_URL, ARCHIVE_SHA1, archive)
        unpacked = Path(scratch) / "unpacked"
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(unpacked, filter="data")  # refuses paths outside `unpacked`
        except (tarfile.TarError, OSError) as exc:
            raise RegistryError(f"cannot unpack {ARCHIVE_URL}: {exc}") from None
        try:
            _application_dir(unpacked).replace(target)  # a later run never sees half of it
        except OSError:
            if not target.exists():  # else another install got there first: the same files
                raise
    return target


def _download(url: str, sha1: str, path: Path) -> None:
    digest = hashlib.sha1()
    try:
        with (
            httpx.stream("GET", url, follow_redirects=True, timeout=60.0) as response,
            path.open("wb") as out,
        ):
            if response.status_code != 200:
                raise RegistryError(f"downloading {url} failed: HTTP {response.status_code}")
            for chunk in response.iter_bytes(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except httpx.HTTPError as exc:
        raise RegistryError(f"downloading {url} failed: {exc or type(exc).__name__}") from None
    if digest.hexdigest() != sha1:
        raise RegistryError(f"{url} has SHA-1 {digest.hexdigest()}, not the pinned {sha1}")


def _application_dir(unpacked: Path) -> Path:
    """The folder holding the runner jar: the archive's root, or its one top folder."""
    if (unpacked / RUNNER).is_file():
        return unpacked
    folders = [path for path in unpacked.iterdir() if path.is_dir()]
    if len(folders) == 1 and (folders[0] / RUNNER).is_file():
        return folders[0]
    raise RegistryError(f"{ARCHIVE_URL} holds no {RUNNER}")


def _tail(text: str) -> str:
    """The line that says why: the last error logged, without its time, logger and thread;
    else the last line (a stack trace ends in a frame, which says nothing)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [_ERROR.sub("", line) for line in lines if " ERROR " in line]
    if errors:
        return errors[-1]
    return lines[-1] if lines else "no output"


_ERROR = re.compile(r"^.*? ERROR \[[^\]]*\] \([^)]*\) ")


def _in_use(host: str, port: int) -> bool:
    """Whether something listens on the port. Checked before the JVM starts: the readiness
    probe would take another server's answer there for this one's."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no owner
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


class LocalRegistry(ServerProcess):
    """Apicurio Registry on loopback, on `port` (0: a free one). Schemas are held in memory and
    last until `stop`; `data_dir` holds its log and scratch files."""

    def __init__(
        self,
        data_dir: Path,
        port: int = 0,
        host: str = HOST,
        heap: str = "256m",
        java: str = "java",
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.host = host
        self.port = port or free_port()
        self.heap = heap
        self.java = java
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.data_dir / "registry.log"

    @property
    def url(self) -> str:
        """The base URL Confluent clients take (`schema.registry.url`)."""
        return f"http://{self.host}:{self.port}{CCOMPAT}"

    def start(self, timeout: float = 60.0) -> LocalRegistry:
        application = home()
        if not (application / RUNNER).is_file():
            raise RegistryError(
                f"Apicurio Registry is not installed ({application}); `make setup` installs it"
            )
        java = shutil.which(self.java)
        if java is None:
            raise RegistryError(f"{self.java} not found: the registry runs on Java 17 or newer")
        if _in_use(self.host, self.port):
            raise RegistryError(f"port {self.port} on {self.host} is in use by another process")
        scratch = self.data_dir / "tmp"
        try:
            scratch.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(f"cannot make the data directory: {exc.strerror or exc}") from None
        command = [
            java,
            f"-Xmx{self.heap}",
            "-Djava.awt.headless=true",
            f"-Djava.io.tmpdir={scratch}",
            f"-Dquarkus.http.host={self.host}",
            f"-Dquarkus.http.port={self.port}",
            "-jar",
            str(application / RUNNER),
        ]
        self._spawn(command, self.log, self.data_dir)  # Quarkus writes beside itself
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        last = "not answering"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    code = self.process.returncode
                    self.process = None
                    raise RegistryError(
                        f"Apicurio Registry exited with code {code}: "
                        f"{_tail(self.log.read_text(errors='replace'))} (log: {self.log})"
                    )
                try:
                    response = client.get(f"{self.url}/subjects")
                    if response.status_code == 200:
                        return
                    last = f"HTTP {response.status_code}"
                except httpx.HTTPError as exc:
                    last = str(exc) or type(exc).__name__
                time.sleep(0.3)
        self.stop()
        raise RegistryError(
            f"Apicurio Registry did not answer within {timeout:.0f} s: {last} (log: {self.log})"
        )


if __name__ == "__main__":  # `make setup`: python -m supervisor.devstack.registry install
    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m supervisor.devstack.registry install")
    try:
        print(f"Apicurio Registry: {install()}")
    except (RegistryError, OSError) as exc:
        sys.exit(f"error: {exc}")
