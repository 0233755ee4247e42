"""Secrets in consumerProperties: stored as given, masked in every response and log line."""

from __future__ import annotations

import copy
import re
from typing import Any

from tasks.spec.errors import SpecError

MASK = "<masked>"
_SECRET_KEY = re.compile(
    r"(password|passwd|secret|jaas|credential|token|private|(^|\.)key$|keystore\.key|user\.info)",
    re.I,
)


def is_secret(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def _properties(spec: dict[str, Any]) -> dict[str, Any] | None:
    props = spec.get("spec", {}).get("ioConfig", {}).get("consumerProperties")
    return props if isinstance(props, dict) else None


def _mask(props: dict[str, Any] | None) -> None:
    if props is not None:
        for key in props:
            if is_secret(key) and props[key] is not None:
                props[key] = MASK


def mask_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of a normalized spec (or a tombstone) with every secret value masked."""
    masked = copy.deepcopy(spec)
    _mask(_properties(masked))
    return masked


def mask_task(payload: dict[str, Any]) -> dict[str, Any]:
    """A copy of a task payload with the secrets of its consumerProperties masked."""
    masked = copy.deepcopy(payload)
    props = masked.get("ioConfig", {}).get("consumerProperties")
    _mask(props if isinstance(props, dict) else None)
    return masked


def restore_masked(spec: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """An update that sends back a masked value keeps the stored secret instead of the mask."""
    props = _properties(spec)
    if props is None:
        return spec
    before = _properties(previous) if previous is not None else None
    for key, value in props.items():
        if value != MASK:
            continue
        if before is None or key not in before:
            raise SpecError.single(
                f"spec.ioConfig.consumerProperties.{key}",
                f"holds the placeholder {MASK}; send the real value",
            )
        props[key] = before[key]
    return spec
