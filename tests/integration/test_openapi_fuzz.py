"""schemathesis over openapi.yaml against the real service (SQLite): generated requests to
every operation, valid and invalid, never get a server error, and every status code they get
is one the document lists."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from pydantic import SecretStr
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from supervisor.settings import Settings
from supervisor.testkit.service import RunningService

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = schemathesis.openapi.from_path(ROOT / "openapi.yaml")
EXAMPLES = 20  # per operation: bounded, so the suite stays fast


ADMIN = "Basic " + base64.b64encode(b"admin:fuzz-admin-1").decode()


@pytest.fixture(scope="module", params=["none", "basic"])
def service(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str]]]:
    """The service's URL and the headers a request carries (the admin's, with authentication
    on: the requests then reach every route's own checks)."""
    root = tmp_path_factory.mktemp("fuzz")
    service_settings = Settings(
        auth=request.param,
        admin_password=SecretStr("fuzz-admin-1"),
        metadata_url=f"sqlite:///{root / 'meta.db'}",
        deep_storage=root / "segments",
        work_dir=root / "work",
        max_request_bytes=64 * 1024,
        run_supervisors=False,
    )
    with RunningService(service_settings) as running:
        yield running.url, ({"Authorization": ADMIN} if request.param == "basic" else {})


@SCHEMA.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same requests each run
)
def test_no_server_error_and_only_documented_codes(
    case: schemathesis.Case, service: tuple[str, dict[str, str]]
) -> None:
    url, headers = service
    case.call_and_validate(
        base_url=url, headers=headers, checks=[not_a_server_error, status_code_conformance]
    )
