"""Secrets in consumerProperties: stored as given, masked in every response and log line, and
never sent anywhere new on the strength of a mask.

A key holds a secret when a word of its name says so (secret, password, key, token, credential,
...), also inside a compound lower-case word (`keypassword`, `clientsecret`, `apikey`: a word
holding one, or ending in `key`), when it ends in `.pem`, or when it is a whole login
configuration (`sasl.jaas.config`, `sasl.oauthbearer.config`); at any depth of
consumerProperties. The variables of Druid's dynamic config provider name environment variables,
not secrets."""

from __future__ import annotations

import copy
import re
from typing import Any

from tasks.kafka_properties import PROVIDER
from tasks.spec.errors import SpecError

MASK = "<masked>"
PROPERTIES = "spec.ioConfig.consumerProperties"
_SECRET_WORDS = frozenset(
    {"secret", "password", "passwd", "key", "token", "credential", "credentials", "private", "jaas"}
)
# Found inside a compound word too ("key" only at its end: `keystore` names a file's place)
_SECRET_PARTS = ("secret", "password", "passwd", "token", "credential", "private", "jaas")
_SECRET_KEYS = frozenset({"sasl.jaas.config", "sasl.oauthbearer.config", "basic.auth.user.info"})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
# Settings that decide where the secrets go, or whom the client trusts on the way: a masked
# secret is kept only while they are unchanged (else an update could send it elsewhere).
_DESTINATION_KEYS = frozenset(
    {
        "bootstrap.servers",
        "security.protocol",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
        PROVIDER,
    }
)
_DESTINATION = re.compile(
    r"(url|urls|uri|endpoint|endpoints|\.class|\.classes)$|^ssl\.(truststore|ca)\.|"
    r"^sasl\.oauthbearer\.|^https\.ca\.",
    re.I,
)


# Named like secrets, but say where a secret is, not what it is.
_NOT_SECRET_KEYS = frozenset({"basic.auth.credentials.source"})


def is_secret(key: str) -> bool:
    if key.lower() in _NOT_SECRET_KEYS:
        return False
    if key.lower() in _SECRET_KEYS or key.lower().endswith(".pem"):
        return True
    return any(_secret_word(word.lower()) for word in _WORD.findall(key))


def _secret_word(word: str) -> bool:
    return (
        word in _SECRET_WORDS or word.endswith("key") or any(part in word for part in _SECRET_PARTS)
    )


def is_destination(key: str) -> bool:
    return key in _DESTINATION_KEYS or bool(_DESTINATION.search(key))


def _properties(spec: dict[str, Any]) -> dict[str, Any] | None:
    props = spec.get("spec", {}).get("ioConfig", {}).get("consumerProperties")
    return props if isinstance(props, dict) else None


_DECODERS = ("avroBytesDecoder", "protoBytesDecoder")


def decoder_sections(
    spec: dict[str, Any], task: bool = False
) -> list[tuple[str, dict[str, Any], str]]:
    """(path, holder, key) of each schema registry decoder's config and headers (which hold
    its credentials: basic.auth.user.info, an Authorization header) in the inputFormat, a
    kafka one's valueFormat and keyFormat, and a legacy parser; of a supervisor spec, or of a
    task payload (`task`: its sections at the top)."""
    body: dict[str, Any] = (
        spec if task else spec["spec"] if isinstance(spec.get("spec"), dict) else {}
    )
    root = "" if task else "spec."
    places: list[tuple[str, Any]] = []
    io: dict[str, Any] = body["ioConfig"] if isinstance(body.get("ioConfig"), dict) else {}
    given = io.get("inputFormat")
    places.append((f"{root}ioConfig.inputFormat", given))
    if isinstance(given, dict):
        for part in ("valueFormat", "keyFormat"):
            places.append((f"{root}ioConfig.inputFormat.{part}", given.get(part)))
    schema: dict[str, Any] = body["dataSchema"] if isinstance(body.get("dataSchema"), dict) else {}
    places.append((f"{root}dataSchema.parser", schema.get("parser")))
    found = []
    for path, holder in places:
        if not isinstance(holder, dict):
            continue
        for name in _DECODERS:
            decoder = holder.get(name)
            if not isinstance(decoder, dict):
                continue
            for key in ("config", "headers"):
                if isinstance(decoder.get(key), dict):
                    found.append((f"{path}.{name}.{key}", decoder, key))
    return found


def _mask_decoder(holder: dict[str, Any], key: str) -> None:
    """A decoder's config: its secret-named values; its headers: every value (an
    Authorization or Cookie header is a credential whatever its name)."""
    if key == "headers":
        holder[key] = {
            name: MASK if value is not None else None for name, value in holder[key].items()
        }
    else:
        _mask(holder[key])


def _mask(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == PROVIDER:
                continue
            if is_secret(str(key)) and value is not None:
                node[key] = MASK
            else:
                _mask(value)
    elif isinstance(node, list):
        for item in node:
            _mask(item)


def mask_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of a normalized spec (or a tombstone) with every secret value masked."""
    masked = copy.deepcopy(spec)
    _mask(_properties(masked))
    for _, holder, key in decoder_sections(masked):
        _mask_decoder(holder, key)
    return masked


def mask_task(payload: dict[str, Any]) -> dict[str, Any]:
    """A copy of a task payload with the secrets of its consumerProperties masked."""
    masked = copy.deepcopy(payload)
    _mask(masked.get("ioConfig", {}).get("consumerProperties"))
    for _, holder, key in decoder_sections(masked, task=True):
        _mask_decoder(holder, key)
    return masked


def _restore(node: Any, before: Any, path: str, restored: list[str]) -> Any:
    """`node` with each MASK replaced by the value at the same place in `before`."""
    if isinstance(node, str) and node == MASK:
        if before is None or before == MASK:
            raise SpecError.single(path, f"holds the placeholder {MASK}; send the real value")
        restored.append(path)
        return before
    if isinstance(node, dict):
        old = before if isinstance(before, dict) else {}
        return {k: _restore(v, old.get(k), f"{path}.{k}", restored) for k, v in node.items()}
    if isinstance(node, list):
        old_list = before if isinstance(before, list) else []
        return [
            _restore(v, old_list[i] if i < len(old_list) else None, f"{path}[{i}]", restored)
            for i, v in enumerate(node)
        ]
    return node


def restore_masked(spec: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """An update that sends back a masked value keeps the stored secret instead of the mask,
    as long as nothing that decides where secrets go changed; otherwise it is a 400 asking
    for the secrets again."""
    _restore_decoders(spec, previous)
    props = _properties(spec)
    if props is None:
        return spec
    before = (_properties(previous) if previous is not None else None) or {}
    restored: list[str] = []
    spec["spec"]["ioConfig"]["consumerProperties"] = new = _restore(
        props, before, PROPERTIES, restored
    )
    if restored:
        for key in sorted(set(new) | set(before)):
            if is_destination(key) and new.get(key) != before.get(key):
                raise SpecError.single(
                    f"{PROPERTIES}.{key}",
                    f"changed while {restored[0][len(PROPERTIES) + 1 :]} was sent masked "
                    f"({MASK}): send every secret again with this change",
                )
    return spec


def _restore_decoders(spec: dict[str, Any], previous: dict[str, Any] | None) -> None:
    """Masked registry credentials sent back keep the stored ones, while the decoder's
    URLs are unchanged (else they could be sent to another registry)."""
    before = {path: (holder, key) for path, holder, key in decoder_sections(previous or {})}
    for path, holder, key in decoder_sections(spec):
        old_holder, _ = before.get(path, ({}, key))
        restored: list[str] = []
        holder[key] = _restore(holder[key], old_holder.get(key), path, restored)
        if restored and any(holder.get(k) != old_holder.get(k) for k in ("url", "urls")):
            raise SpecError.single(
                f"{path.rsplit('.', 1)[0]}.url",
                f"changed while {restored[0]} was sent masked ({MASK}): send the "
                "credentials again with this change",
            )
