"""The project's HTTP clients share one TLS context (tasks/tls.py): httpx otherwise loads the
CA certificates for every client, ~0.8 MiB held outside Python's allocator for its life."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from supervisor.clients.host_app_api import HostAppClient
from supervisor.clients.worker_api import WorkerClient
from supervisor.devstack.certs import self_signed
from tasks import tls
from tasks.rows.decoding import Registry


class Row:
    def __init__(self, host: str) -> None:
        self.host, self.scheme, self.token = host, "https", "t" * 32


def test_clients_of_many_peers_load_the_certificates_once(monkeypatch: Any) -> None:
    loads: list[Any] = []
    original = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(args or kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    tls._context.cache_clear()
    workers = [WorkerClient(Row(f"127.0.0.1:{port}")) for port in range(9000, 9010)]
    apps = [HostAppClient("127.0.0.1") for _ in range(3)]
    registries = [Registry([f"https://127.0.0.1:{port}"]) for port in range(8000, 8003)]
    assert len(loads) == 1
    for http in [w.http for w in workers] + [a.http for a in apps] + [r.client for r in registries]:
        http.close()


def test_a_new_ca_file_gets_a_context_of_its_own(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    default = tls.client_context()
    assert tls.client_context() is default
    certs = self_signed(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
    trusting = tls.client_context()
    assert trusting is not default
    [ca] = trusting.get_ca_certs()  # the dev CA only
    assert ca["subject"] == ((("commonName", "Sluicegate dev CA"),),)
