"""The service's settings: what each refuses, and how a refusal names the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.controller.mirror import consumer_group
from supervisor.settings import Settings, settings_problems


def problems(**values: object) -> str:
    with pytest.raises(ValueError) as caught:
        Settings(**values)  # type: ignore[arg-type]
    return settings_problems(caught.value)


def test_each_bad_setting_is_named_by_its_environment_variable() -> None:
    said = problems(port="x", consumer_group_prefix="a b")
    assert said.startswith("port (SLUICEGATE_PORT): Input should be a valid integer")
    assert "; consumer_group_prefix (SLUICEGATE_CONSUMER_GROUP_PREFIX): String should" in said
    assert "\n" not in said


def test_a_rule_over_two_settings_is_said_in_its_own_words() -> None:
    assert problems(tls_cert=Path("/etc/cert.pem")) == "tls_cert and tls_key: give both or neither"


def test_the_mirrors_consumer_group_is_the_prefix_and_the_supervisor_id() -> None:
    assert Settings().consumer_group_prefix == "sluicegate-"
    assert consumer_group("wiki") == "sluicegate-wiki"
    prefix = Settings(consumer_group_prefix="acme.prod-").consumer_group_prefix
    assert consumer_group("wiki", prefix) == "acme.prod-wiki"


@pytest.mark.parametrize("prefix", ["", "a b", "team/", "x" * 101, "é-"])
def test_a_consumer_group_prefix_kafka_tools_cannot_take_plainly_is_refused(prefix: str) -> None:
    said = problems(consumer_group_prefix=prefix)
    assert said.startswith("consumer_group_prefix (SLUICEGATE_CONSUMER_GROUP_PREFIX): ")
