"""consumerProperties as Druid users write them, made ready for a client: values named by
Druid's dynamic config provider (`druid.dynamic.config.provider`, type `environment`) read
from the environment of the process that uses them, so a spec can name a secret instead of
holding it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

PROVIDER = "druid.dynamic.config.provider"


class MissingVariable(ValueError):
    """A variable the spec names is not set where the properties are used."""


def provider_variables(props: Mapping[str, Any]) -> dict[str, str]:
    """{property: environment variable} of the spec's environment provider ({} if none);
    a provider of another shape raises ValueError naming what is wrong."""
    provider = props.get(PROVIDER)
    if provider is None:
        return {}
    if not isinstance(provider, dict) or provider.get("type") != "environment":
        raise ValueError('must be {"type": "environment", "variables": {...}}')
    variables = provider.get("variables", {})
    if not isinstance(variables, dict) or not all(
        isinstance(key, str) and isinstance(name, str) and name for key, name in variables.items()
    ):
        raise ValueError("variables: must map property names to environment variable names")
    return dict(variables)


def resolved(props: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The properties with the provider's values filled in from `environ` (this process's
    environment by default) and the provider itself left out; Druid's order: the provider's
    values win over the spec's own."""
    variables = provider_variables(props)
    if not variables:
        return dict(props)
    environ = os.environ if environ is None else environ
    result = {key: value for key, value in props.items() if key != PROVIDER}
    for key, name in variables.items():
        if name not in environ:
            raise MissingVariable(
                f"consumerProperties.{key}: environment variable {name} is not set"
            )
        result[key] = environ[name]
    return result


# A JAAS configuration's options: key="value" (or key=value) pairs after the login module.
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_LOGIN_WITH_PASSWORD = ("PlainLoginModule", "ScramLoginModule")
# Java client TLS tuning librdkafka has no setting for and needs none (it negotiates TLS 1.2
# and 1.3 with the system's algorithms): left out. Other Java-only settings that are not
# mapped below (a JKS store, a Kerberos or OAuth login) stay, so that librdkafka refuses them
# and the batch goes to Spark's Kafka source, which takes them.
_JAVA_TUNING = frozenset(
    {
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.trustmanager.algorithm",
        "ssl.keymanager.algorithm",
    }
)


def jaas_options(jaas: str) -> dict[str, str]:
    """A JAAS configuration's options (quoted values unescaped, as Java's tokenizer does)."""
    return {
        match.group(1): (
            re.sub(r"\\(.)", r"\1", match.group(2))
            if match.group(2) is not None
            else match.group(3)
        )
        for match in _JAAS_OPTION.finditer(jaas)
    }


def librdkafka_config(props: Mapping[str, object]) -> dict[str, str]:
    """A Java client's consumer properties (what Druid specs hold) as librdkafka's: the
    JAAS user and password of PLAIN and SCRAM as sasl.username/sasl.password, a PEM trust
    store as ssl.ca.pem (or ssl.ca.location), a PEM key store as ssl.certificate.pem and
    ssl.key.pem, Java's empty endpoint identification as "none"; librdkafka's own names
    pass through, and what cannot be mapped stays for librdkafka to refuse."""
    config = {k: str(v) for k, v in props.items() if k not in _JAVA_TUNING}
    jaas = props.get("sasl.jaas.config")
    if isinstance(jaas, str) and any(module in jaas for module in _LOGIN_WITH_PASSWORD):
        options = jaas_options(jaas)
        if "username" in options and "password" in options:
            del config["sasl.jaas.config"]
            config.setdefault("sasl.username", options["username"])
            config.setdefault("sasl.password", options["password"])
    if str(props.get("ssl.truststore.type", "")).upper() == "PEM":
        for key in ("ssl.truststore.type", "ssl.truststore.password"):
            config.pop(key, None)
        if "ssl.truststore.certificates" in props:
            config.setdefault("ssl.ca.pem", config.pop("ssl.truststore.certificates"))
        elif "ssl.truststore.location" in props:
            config.setdefault("ssl.ca.location", config.pop("ssl.truststore.location"))
    if str(props.get("ssl.keystore.type", "")).upper() == "PEM":
        config.pop("ssl.keystore.type", None)
        if "ssl.keystore.certificate.chain" in props:
            config.setdefault("ssl.certificate.pem", config.pop("ssl.keystore.certificate.chain"))
        if "ssl.keystore.key" in props:
            config.setdefault("ssl.key.pem", config.pop("ssl.keystore.key"))
    if config.get("ssl.endpoint.identification.algorithm") == "":
        config["ssl.endpoint.identification.algorithm"] = "none"
    return config
