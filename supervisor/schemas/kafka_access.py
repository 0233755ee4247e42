"""What a spec's consumerProperties may make Sluicegate do.

A setting that names a file, a shared library, an engine, a command, a Java class or a URL
would act inside the service and its tasks (read /etc/shadow as a CA, load a library, POST a
secret to any address): each is refused at submit, with a 400 naming the key, unless the
operator allows it (`SLUICEGATE_ALLOWED_CONSUMER_PROPERTIES`). The service's own Kafka
clients (partitions, offsets, lag) take only what reaching the broker needs, plus what the
operator allowed; tasks get the spec's properties as given. Druid's dynamic config provider
may name only the environment variables the operator allows (`SLUICEGATE_SPEC_ENVIRONMENT`).
A schema registry or a Protobuf descriptor file an inputFormat names is fetched or read by the
tasks: each must lie under a place the operator allows (`SLUICEGATE_ALLOWED_SCHEMA_LOCATIONS`)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from supervisor.schemas.secrets import PROPERTIES, is_secret
from supervisor.settings import Settings
from tasks import binary_formats
from tasks.kafka_properties import PROVIDER, provider_variables, resolved
from tasks.spec.errors import FieldError, SpecError

# Keys that make a client act on the machine or call out: files, libraries, engines,
# commands, classes (Java), URLs, Java config providers (which read files).
_ACTING = re.compile(
    r"(\.location|\.locations|\.file|\.files|\.keytab|\.cmd|\.url|\.urls|\.class|"
    r"\.classes|serializer|deserializer)$|"
    r"^ssl\.engine\.|^ssl\.providers$|^plugin\.library\.paths$|^config\.providers|"
    r"^metric\.reporters$|^security\.providers$|^partition\.assignment\.strategy$|"
    # OIDC: librdkafka fetches a token from a URL it fills in itself (Azure IMDS)
    r"^sasl\.oauthbearer\.(method|metadata\.)",
    re.I,
)
# The login modules a JAAS configuration may name without the operator's leave: user names
# and passwords or tokens inline. Others (Kerberos: keytab files) act on the machine.
_LOGIN_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
)
# What the service's own clients take: where the brokers are and how to log in to them.
SERVICE_KEYS = frozenset(
    {
        "bootstrap.servers",
        "security.protocol",
        "client.id",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "sasl.jaas.config",
        "ssl.endpoint.identification.algorithm",
        "enable.ssl.certificate.verification",
        "ssl.ca.pem",
        "ssl.certificate.pem",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.certificates",
        "ssl.keystore.type",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
    }
)


@dataclass(frozen=True)
class KafkaAccess:
    """The operator's leave: consumer properties allowed beyond the defaults (exact names, or
    prefixes ending in '*'), and a pattern of environment variable names specs may name."""

    allowed: frozenset[str] = frozenset()
    environment: str = ""
    # where an inputFormat's schema registry and descriptor files may be: URL or path
    # prefixes ("http://registry:8081/", "file:///etc/protos/", "/etc/protos/")
    schema_locations: tuple[str, ...] = ()

    @classmethod
    def parse(cls, allowed: str, environment: str, schema_locations: str = "") -> KafkaAccess:
        names = frozenset(name.strip() for name in allowed.split(",") if name.strip())
        places = tuple(p.strip() for p in schema_locations.split(",") if p.strip())
        return cls(names, environment.strip(), places)

    @classmethod
    def of(cls, settings: Settings) -> KafkaAccess:
        """The operator's leave as the service's settings give it."""
        return cls.parse(
            settings.allowed_consumer_properties,
            settings.spec_environment,
            settings.allowed_schema_locations,
        )

    def format_problems(self, input_format: Any, path: str) -> list[FieldError]:
        """The schema registries and descriptor files an inputFormat names that the operator
        has not allowed (a task would fetch or read them)."""
        if not isinstance(input_format, dict):
            return []
        return [
            FieldError(
                field,
                f"names {location}, which the operator has not allowed specs to name "
                "(SLUICEGATE_ALLOWED_SCHEMA_LOCATIONS)",
            )
            for field, location in binary_formats.locations(input_format, path)
            if not self._allows_location(location)
        ]

    def _allows_location(self, location: str) -> bool:
        place = _place(location)
        return place is not None and any(
            _under(place, allowed)
            for allowed in map(_place, self.schema_locations)
            if allowed is not None
        )

    def allows(self, key: str) -> bool:
        return any(
            key == name or (name.endswith("*") and key.startswith(name[:-1]))
            for name in self.allowed
        )

    def problems(self, props: Mapping[str, Any]) -> list[FieldError]:
        """What the operator has not allowed in a spec's consumerProperties."""
        found: list[FieldError] = []
        for key, value in props.items():
            field = f"{PROPERTIES}.{key}"
            if key == PROVIDER:
                found.extend(self._provider_problems(props))
            elif self.allows(key):
                continue
            elif _ACTING.search(key):
                found.append(
                    FieldError(
                        field,
                        "names a file, library, command, class or URL the service would use; "
                        "the operator allows it with SLUICEGATE_ALLOWED_CONSUMER_PROPERTIES",
                    )
                )
            elif key == "sasl.jaas.config" and not _plain_login(value):
                found.append(
                    FieldError(
                        field,
                        "is not one entry of the Plain, SCRAM or OAuthBearer login module "
                        "('<module> required name=value ...;'); the operator allows others "
                        "with SLUICEGATE_ALLOWED_CONSUMER_PROPERTIES",
                    )
                )
        return found

    def _provider_problems(self, props: Mapping[str, Any]) -> list[FieldError]:
        field = f"{PROPERTIES}.{PROVIDER}"
        try:
            variables = provider_variables(props)
        except ValueError as exc:
            return [FieldError(field, str(exc))]
        found = []
        for key, name in variables.items():
            if not is_secret(key) or _ACTING.search(key):
                # a secret's value goes only where secrets go: not into client.id (which
                # librdkafka logs), not into a setting the operator has to allow
                found.append(
                    FieldError(
                        f"{field}.variables.{key}",
                        "the provider may fill in secrets only (passwords, keys, tokens, "
                        "JAAS configs)",
                    )
                )
            elif not self.environment or not re.fullmatch(self.environment, name):
                found.append(
                    FieldError(
                        f"{field}.variables.{key}",
                        f"names the environment variable {name}, which the operator has not "
                        "allowed specs to read (SLUICEGATE_SPEC_ENVIRONMENT)",
                    )
                )
        return found

    def check(self, props: Mapping[str, Any]) -> None:
        problems = self.problems(props)
        if problems:
            raise SpecError(problems)

    def service_config(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """The properties the service's own clients use: the provider's values filled in,
        then only what reaching the broker needs and what the operator allowed."""
        return {
            key: value
            for key, value in resolved(props).items()
            if key in SERVICE_KEYS or self.allows(key)
        }


# One JAAS entry as Kafka's JaasConfig reads it: a login module's class, its control flag, then
# name=value options (a value bare or double-quoted with escapes), up to its semicolon.
_JAAS_ENTRY = re.compile(
    r"\s*(?P<module>[A-Za-z_$][\w$.]*)\s+(?:required|requisite|sufficient|optional)"
    r'(?:\s+[\w.$-]+\s*=\s*(?:"(?:[^"\\]|\\.)*"|[^\s;"=]+))*\s*;'
)


def _plain_login(value: Any) -> bool:
    """The whole configuration is one entry, of one of the login modules allowed: a second
    module after a Plain one (which Kafka's client would refuse, or another client use) is not
    let through on the strength of the first."""
    if not isinstance(value, str):
        return False
    entry = _JAAS_ENTRY.match(value)
    return (
        entry is not None
        and entry.group("module") in _LOGIN_MODULES
        and value[entry.end() :].strip() == ""
    )


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _place(text: str) -> tuple[str, str, int | None, str] | None:
    """(scheme, host, port, normalized path) of a URL or absolute path, as it will be read:
    escapes undone and `..` resolved, so that a prefix cannot be left by climbing out of it.
    None for what is never allowed (credentials in a URL, a relative path, other schemes)."""
    parsed = urlparse(text.strip())
    if parsed.scheme in ("http", "https"):
        try:
            port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
        except ValueError:
            return None
        if parsed.username is not None or parsed.password is not None or not parsed.hostname:
            return None
        path = posixpath.normpath(unquote(parsed.path) or "/")
        return parsed.scheme, parsed.hostname.lower(), port, path
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        raw = unquote(parsed.path)
    elif parsed.scheme == "":
        raw = unquote(text.strip())
    else:
        return None
    return ("file", "", None, posixpath.normpath(raw)) if raw.startswith("/") else None


def _under(
    place: tuple[str, str, int | None, str], allowed: tuple[str, str, int | None, str]
) -> bool:
    """Same scheme, host and port, and the path at or below the allowed one (by segments:
    /etc/protos does not allow /etc/protos-other)."""
    if place[:3] != allowed[:3]:
        return False
    base = allowed[3].rstrip("/")
    return not base or place[3] == base or place[3].startswith(base + "/")
