"""consumerProperties as Druid users write them, made ready for a client: values named by
Druid's dynamic config provider (`druid.dynamic.config.provider`, type `environment`) read
from the environment of the process that uses them, so a spec can name a secret instead of
holding it."""

from __future__ import annotations

import os
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
