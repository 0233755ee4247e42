"""The status codes each route answers, added to the OpenAPI document from one place: what
the guard, the body reader, the follower redirect and the domain errors answer is the same
for every route of a kind (FastAPI lists only 200 and a 422 the app never sends)."""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI

from supervisor.api.auth import OPEN_PATHS
from supervisor.api.redirect import PREFIXES as REDIRECTED

ERROR = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "description": "what is wrong, naming the field"},
        "field": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "reason": {"type": "string"}},
            },
        },
    },
    "required": ["error"],
}
_REF = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_READS = {"get", "head", "options"}


def _open(path: str) -> bool:
    """Paths any request reaches (supervisor.api.auth.OPEN_PATHS)."""
    return any(path == p or path.startswith(p + "/") for p in OPEN_PATHS)


# (status, description, applies(path, method, operation))
_CODES: list[tuple[str, str, Any]] = [
    (
        "307",
        "a follower sends the write to the leader (same method and body)",
        lambda path, method, op: method not in _READS and path.startswith(REDIRECTED),
    ),
    (
        "400",
        "a bad request: the field and the reason (also a Host this service does not "
        "answer to, a path with control characters)",
        lambda path, method, op: True,
    ),
    (
        "401",
        "authentication is on and the request has no valid credentials (Basic or Bearer)",
        lambda path, method, op: not _open(path),
    ),
    (
        "403",
        "the identity's roles lack the permission; a write from another site's page; a task "
        "action without its task's token",
        lambda path, method, op: not _open(path) or method not in _READS,
    ),
    (
        "404",
        "no such supervisor, task or datasource (or no compaction config for it)",
        lambda path, method, op: (
            "{" in path
            or path.endswith("/isLeader")
            or path.startswith("/druid/coordinator/v1/compaction/")
        ),
    ),
    (
        "409",
        "another request changed it first, or a publish that does not match the committed offsets",
        lambda path, method, op: (
            (method == "post" and path.startswith("/druid/indexer/v1/"))
            or (method in ("post", "delete") and path.startswith("/druid/coordinator/v1/"))
        ),
    ),
    ("413", "the body is larger than the limit", lambda path, method, op: "requestBody" in op),
    ("414", "the path is too long", lambda path, method, op: True),
    (
        "415",
        "the body is not application/json (a write without a body may leave Content-Type out, "
        "not declare another)",
        lambda path, method, op: method not in _READS,
    ),
    (
        "429",
        "wrong credentials too often lately from this address or for this user: try again "
        "after Retry-After",
        lambda path, method, op: not _open(path),
    ),
    (
        "503",
        "no overlord leads right now, or the metadata DB cannot be reached (try again); or the "
        "supervisor is not healthy",
        lambda path, method, op: (
            not _open(path)
            or method not in _READS
            or (path.endswith(("/leader", "/health")) and path != "/status/health")
        ),
    ),
]


def documented(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document with the status codes it answers."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = FastAPI.openapi(app)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)
            for status, description, applies in _CODES:
                if status not in responses and applies(path, method, operation):
                    responses[status] = {"description": description, **copy.deepcopy(_REF)}
            operation["responses"] = dict(sorted(responses.items()))
    app.openapi_schema = document
    return document
