"""`sluicegate serve` as a child process (the end-to-end tests, the failover benchmark and
the chaos runs): started, SIGKILLed, restarted on the same port. Several (`name`) may share a
PostgreSQL metadata DB (`db_url`) and one task host (the work directory under `root`).

With `secure` (the default) it serves HTTPS with a dev CA's certificate (every client here,
the overlords' and the tasks' own, verifies it: SSL_CERT_FILE for the processes) and
authentication is on: clients use `auth` (the admin), tasks their own tokens. Its fault
points are armed by a file of its own (`arm`; supervisor/testkit/faults.py)."""

from __future__ import annotations

import base64
import os
import signal
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Generator
from functools import cache
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Executable

from supervisor.devstack.certs import Certs, self_signed
from supervisor.devstack.service import LocalService
from supervisor.net import free_port
from supervisor.testkit.service import db_rows

ADMIN = ("admin", "e2e-admin-password")


@cache
def dev_tls() -> Certs:
    """The dev CA and a loopback certificate the secure overlords serve by default."""
    return self_signed(Path(tempfile.gettempdir()) / "sluicegate-e2e-tls")


def verifying(certs: Certs) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certs.ca))


class AdminAuth(httpx.Auth):
    """The admin's Basic credentials on every request, again on the leader after a
    follower's redirect (httpx drops them on the way to another address)."""

    def __init__(self) -> None:
        self.header = "Basic " + base64.b64encode(":".join(ADMIN).encode()).decode()

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self.header
        response = yield request
        if response.status_code == 401 and "authorization" not in response.request.headers:
            retry = response.request
            retry.headers["Authorization"] = self.header
            yield retry


class Overlord:
    """`address` is where it listens (loopback unless a test's network says otherwise),
    `tls` the certificate it serves (one naming that address), `netns` a network namespace to
    run in; `env` adds to or overrides its settings."""

    auth: httpx.Auth | None = AdminAuth()  # the admin's, of every secure overlord

    def __init__(
        self,
        root: Path,
        jar_cache: Path,
        db_url: str | None = None,
        name: str = "overlord",
        runtime: str = "shared",
        address: str = "127.0.0.1",
        tls: Certs | None = None,
        netns: str | None = None,
        secure: bool = True,
        lease_s: float = 3,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.runtime = runtime
        self.secure = secure
        self.tls = (tls or dev_tls()) if secure else None
        scheme = "https" if secure else "http"
        self.url = f"{scheme}://{address}:{self.port}"
        self.verify: ssl.SSLContext | bool = verifying(self.tls) if self.tls else True
        if not secure:
            self.auth = None
        self.netns = netns
        self.db_url = db_url or f"sqlite:///{root / 'meta.db'}"
        self.work = root / "work"
        self.log = root / f"{name}.log"
        self.fault_file = root / f"{name}.fault"
        self.env = {
            **os.environ,
            "SLUICEGATE_HOST": address,
            "SLUICEGATE_PORT": str(self.port),
            "SLUICEGATE_METADATA_URL": self.db_url,
            "SLUICEGATE_DEEP_STORAGE": str(root / "deep"),
            "SLUICEGATE_WORK_DIR": str(self.work),
            "SLUICEGATE_JAR_CACHE": str(jar_cache),
            "SLUICEGATE_TASK_MASTER": "local[1]",
            "SLUICEGATE_TASK_RUNTIME": runtime,
            "SLUICEGATE_KILL_TASKS_ON_EXIT": "true",
            # a SIGKILLed overlord leaves its leader lease behind: its restart waits it out
            "SLUICEGATE_LEASE_S": str(lease_s),
        }
        if self.tls is not None:
            self.env |= {
                "SLUICEGATE_AUTH": "basic",
                "SLUICEGATE_TLS_CERT": str(self.tls.cert),
                "SLUICEGATE_TLS_KEY": str(self.tls.key),
                "SSL_CERT_FILE": str(self.tls.ca),
                "SLUICEGATE_ADMIN_PASSWORD": ADMIN[1],
            }
        self.env |= env or {}
        self.service: LocalService | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "supervisor.testkit.faults", str(self.fault_file)]
        command.append("serve")
        if self.netns is not None:  # `ip netns exec` execs it: the pid stays its own
            command = ["ip", "netns", "exec", self.netns, *command]
        service = LocalService(command, self.url, self.log, self.log.parent, self.env, self.verify)
        self.service = service.start()
        self.process = service.process

    def _get(self, path: str) -> int | None:
        try:
            answer = httpx.get(self.url + path, timeout=2, auth=self.auth, verify=self.verify)
        except httpx.HTTPError:
            return None
        return answer.status_code

    def leads(self) -> bool:
        return self._get("/druid/indexer/v1/isLeader") == 200

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def arm(self, point: str) -> None:
        """Die (SIGKILL by its own hand) at this fault point; "" disarms."""
        self.fault_file.write_text(point)

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def exited(self) -> bool:
        return self.service is not None and self.service.exited()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # kills its tasks on the way out
            self.process.wait(120)

    def rows(self, query: Executable) -> list[Any]:
        return db_rows(self.db_url, query)
