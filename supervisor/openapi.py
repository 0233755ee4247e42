"""Render the app's OpenAPI document as YAML: `python -m supervisor.openapi > openapi.yaml`."""

from __future__ import annotations

import sys

import yaml

from supervisor.app import create_app


def render() -> str:
    document = create_app().openapi()
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
