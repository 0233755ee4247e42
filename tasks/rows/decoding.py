"""What every binary input format shares: the errors of decoding (a record that cannot be
decoded, a schema that cannot be fetched), the decoders Druid names, and the Confluent-compatible
schema registry a decoder fetches its schemas from (tasks/rows/decoders.py)."""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from typing import Any

BINARY_FORMATS = ("avro_stream", "avro_ocf", "protobuf")


AVRO_DECODERS = ("schema_inline", "multiple_schemas_inline", "schema_registry", "schema_repo")


PROTO_DECODERS = ("file", "inline", "schema_registry")


REGISTRY_CONFIG = ("basic.auth.credentials.source", "basic.auth.user.info")


REGISTRY_TIMEOUT_S = 10.0


NOT_FOUND_CODES = (40401, 40402, 40403)  # no such subject, version, schema (Confluent's)


SCHEMAS_KEPT = 1000  # a registry decoder's schemas by id (Druid's capacity defaults higher)


class DecodeError(Exception):
    """The record cannot be decoded: it is unparseable."""


class SchemaUnavailable(Exception):
    """A schema could not be fetched: the batch is to be read again later."""


class Registry:
    """Schemas by id from a Confluent-compatible registry (the first of `urls` that answers),
    kept once fetched: a schema id never changes what it names."""

    def __init__(
        self,
        urls: list[str],
        config: dict[str, Any] | None = None,
        headers: dict[str, Any] | None = None,
        capacity: int = SCHEMAS_KEPT,
    ) -> None:
        import httpx

        from tasks.tls import client_context

        self.urls = [u.rstrip("/") for u in urls]
        config = config or {}
        auth = None
        user_info = config.get("basic.auth.user.info")
        if isinstance(user_info, str) and ":" in user_info:
            user, _, password = user_info.partition(":")
            auth = httpx.BasicAuth(user, password)
        plain_headers = {str(k): str(v) for k, v in (headers or {}).items() if isinstance(v, str)}
        self.client = httpx.Client(
            timeout=REGISTRY_TIMEOUT_S, auth=auth, headers=plain_headers, verify=client_context()
        )
        self.capacity = max(1, min(capacity, SCHEMAS_KEPT))
        self.kept: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def _get(self, path: str) -> dict[str, Any]:
        with self.lock:
            hit = self.kept.get(path)
            if hit is not None:
                self.kept.move_to_end(path)
                return hit
        import httpx

        problems = []
        for url in self.urls:
            try:
                answer = self.client.get(url + path)
            except httpx.HTTPError as exc:
                problems.append(f"{url}: {exc}")
                continue
            if answer.status_code != 200:
                code = _error_code(answer)
                if code in NOT_FOUND_CODES:  # the registry knows no such schema: the record's
                    raise DecodeError(f"the schema registry at {url} has no {path} ({code})")
                # anything else (a wrong URL, no access, the registry unwell) is not the
                # record's fault: nothing is counted unparseable for it
                problems.append(f"{url}: HTTP {answer.status_code}")
                continue
            try:
                found = answer.json()
            except ValueError:
                problems.append(f"{url}: the answer to {path} is not JSON")
                continue
            if not isinstance(found, dict):
                problems.append(f"{url}: the answer to {path} is not an object")
                continue
            with self.lock:
                self.kept[path] = found
                while len(self.kept) > self.capacity:
                    self.kept.popitem(last=False)
            return found
        raise SchemaUnavailable("cannot fetch a schema: " + "; ".join(problems))

    def schema(self, schema_id: int) -> dict[str, Any]:
        """{"schema": text, "schemaType": ..., "references": [...]} of an id."""
        return self._get(f"/schemas/ids/{schema_id}")

    def version(self, subject: str, version: int) -> dict[str, Any]:
        from urllib.parse import quote

        return self._get(f"/subjects/{quote(subject, safe='')}/versions/{version}")


def _error_code(answer: Any) -> int | None:
    """Confluent's error_code of an error answer (40403: no such schema), if it has one."""
    try:
        body = answer.json()
    except ValueError:
        return None
    code = body.get("error_code") if isinstance(body, dict) else None
    return code if isinstance(code, int) else None


def registry_of(decoder: dict[str, Any]) -> Registry:
    urls = decoder.get("urls") or []
    if decoder.get("url"):  # Druid: url wins over urls
        urls = [decoder["url"]]
    capacity = decoder.get("capacity")
    return Registry(
        [str(u) for u in urls],
        decoder.get("config") or {},
        decoder.get("headers") or {},
        capacity if isinstance(capacity, int) and capacity > 0 else SCHEMAS_KEPT,
    )


def framed(data: bytes) -> tuple[int, bytes]:
    """Confluent's wire format: magic byte, a big-endian 4-byte schema id, the rest. The magic
    byte is not checked, as Druid does not check it."""
    if len(data) < 5:
        raise DecodeError(f"a record of {len(data)} bytes has no schema id (5 bytes at least)")
    return struct.unpack(">I", data[1:5])[0], data[5:]
