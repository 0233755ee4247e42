"""A real Confluent-compatible schema registry (`sluicegate registry-local`: Apicurio Registry):
Avro and Protobuf schemas registered over its HTTP API and read back by id, and the command
that runs it until SIGINT."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from supervisor.devstack.registry import LocalRegistry
from supervisor.net import free_port

WIKI_AVRO = {
    "type": "record",
    "name": "Edit",
    "namespace": "wiki",
    "fields": [
        {"name": "page", "type": "string"},
        {"name": "added", "type": "long"},
        {"name": "user", "type": ["null", "string"], "default": None},
    ],
}

WIKI_PROTO = """syntax = "proto3";
package wiki;

message Edit {
  string page = 1;
  int64 added = 2;
  optional string user = 3;
}
"""


def _sluicegate() -> str:
    return str(Path(sys.executable).parent / "sluicegate")


def _register(url: str, subject: str, schema: str, schema_type: str) -> int:
    response = httpx.post(
        f"{url}/subjects/{subject}/versions",
        json={"schema": schema, "schemaType": schema_type},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    assert response.status_code == 200, response.text
    schema_id = response.json()["id"]
    assert isinstance(schema_id, int)
    return schema_id


def test_an_avro_schema_is_read_back_by_its_id(registry: LocalRegistry) -> None:
    text = json.dumps(WIKI_AVRO)
    schema_id = _register(registry.url, "wiki-avro-value", text, "AVRO")
    # the same schema again is the same id, as a producer's serializer relies on
    assert _register(registry.url, "wiki-avro-value", text, "AVRO") == schema_id

    found = httpx.get(f"{registry.url}/schemas/ids/{schema_id}")
    assert found.status_code == 200, found.text
    assert json.loads(found.json()["schema"]) == WIKI_AVRO
    assert found.json().get("schemaType", "AVRO") == "AVRO"  # Confluent leaves AVRO out
    assert "wiki-avro-value" in httpx.get(f"{registry.url}/subjects").json()
    latest = httpx.get(f"{registry.url}/subjects/wiki-avro-value/versions/latest").json()
    assert (latest["id"], latest["version"]) == (schema_id, 1)


def test_a_protobuf_schema_is_read_back_as_proto_text(registry: LocalRegistry) -> None:
    schema_id = _register(registry.url, "wiki-proto-value", WIKI_PROTO, "PROTOBUF")

    found = httpx.get(f"{registry.url}/schemas/ids/{schema_id}").json()
    assert found["schemaType"] == "PROTOBUF"
    assert "message Edit" in found["schema"] and "int64 added = 2;" in found["schema"]
    assert found.get("references", []) == []


def test_registry_local_runs_until_sigint(tmp_path: Path, registry: LocalRegistry) -> None:
    # a port another registry holds is one line and exit 1, before any JVM starts
    taken = subprocess.run(
        [_sluicegate(), "registry-local", "--port", str(registry.port), "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert taken.returncode == 1, taken.stdout + taken.stderr
    in_use = f"port {registry.port} on 127.0.0.1 is in use by another process"
    assert taken.stderr == f"error: {in_use}\n"

    port = free_port()
    process = subprocess.Popen(
        [_sluicegate(), "registry-local", "--port", str(port), "--dir", str(tmp_path / "r")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        url = f"http://127.0.0.1:{port}/apis/ccompat/v7"
        assert f"ready at {url} " in ready, ready + process.stdout.read()
        schema_id = _register(url, "cli-value", json.dumps(WIKI_AVRO), "AVRO")
        assert httpx.get(f"{url}/schemas/ids/{schema_id}").status_code == 200
    finally:
        process.send_signal(signal.SIGINT)
        rest = process.communicate(timeout=60)[0]
    assert process.returncode == 0, rest
    assert "Schema registry stopped" in rest
    assert (tmp_path / "r" / "registry.log").exists()
    with pytest.raises(httpx.ConnectError):  # it stopped, not only the command
        httpx.get(f"{url}/subjects")
