from pathlib import Path

from supervisor.openapi import render


def test_openapi_yaml_is_current() -> None:
    committed = (Path(__file__).resolve().parents[2] / "openapi.yaml").read_text()
    assert committed == render(), "openapi.yaml is stale: run `make openapi`"
