"""The service over TLS: HTTPS with the dev CA's certificate, verified by clients (the CLI
through SSL_CERT_FILE); a client that does not trust the CA is refused the connection."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from supervisor.cli import main
from supervisor.devstack.certs import self_signed
from supervisor.testkit.service import RunningService
from tests.specs import spec


@pytest.mark.parametrize("metadata_url", ["sqlite"], indirect=True)
def test_the_service_serves_https_and_clients_verify_it(
    settings: Any, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    certs = self_signed(tmp_path / "tls")
    settings.tls_cert, settings.tls_key = certs.cert, certs.key
    with RunningService(settings) as service:
        assert service.url.startswith("https://")
        assert settings.advertised_url().startswith("https://")  # what tasks are told
        trusted = ssl.create_default_context(cafile=str(certs.ca))
        with httpx.Client(base_url=service.url, verify=trusted, timeout=30) as api:
            assert api.post("/druid/indexer/v1/supervisor", json=spec("wiki")).status_code == 200
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{service.url}/status/health", timeout=3)
        with pytest.raises(httpx.RemoteProtocolError):  # plain HTTP gets nothing
            httpx.get(service.url.replace("https", "http") + "/status/health", timeout=3)
        monkeypatch.setenv("SSL_CERT_FILE", str(certs.ca))
        assert main(["supervisor", "--url", service.url, "list"]) == 0
        assert "wiki" in capsys.readouterr().out


def test_settings_need_both_halves_of_tls(tmp_path: Path) -> None:
    from supervisor.settings import Settings

    with pytest.raises(ValueError, match="give both or neither"):
        Settings(tls_cert=tmp_path / "c.pem")
