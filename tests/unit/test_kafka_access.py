"""What a spec's consumerProperties may make the service do, and what its clients take."""

from __future__ import annotations

import pytest

from supervisor.schemas.kafka_access import KafkaAccess
from tasks.kafka_properties import MissingVariable, resolved

PROVIDER = {
    "type": "environment",
    "variables": {"sasl.password": "SG_PASSWORD", "ssl.key.password": "SG_KEY"},
}


def test_the_provider_fills_values_from_the_environment_and_wins() -> None:
    props = {
        "bootstrap.servers": "b:9092",
        "sasl.password": "old",
        "druid.dynamic.config.provider": PROVIDER,
    }
    filled = resolved(props, {"SG_PASSWORD": "s3cret", "SG_KEY": "k"})
    assert filled == {
        "bootstrap.servers": "b:9092",
        "sasl.password": "s3cret",
        "ssl.key.password": "k",
    }
    with pytest.raises(MissingVariable, match="SG_KEY is not set"):
        resolved(props, {"SG_PASSWORD": "s3cret"})
    assert resolved({"bootstrap.servers": "b"}) == {"bootstrap.servers": "b"}


def test_the_service_clients_take_only_what_reaching_the_broker_needs() -> None:
    props = {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "ssl.ca.location": "/etc/shadow",
        "ssl.engine.location": "/tmp/evil.so",
        "fetch.max.bytes": "1",
    }
    config = KafkaAccess().service_config(props)
    assert config == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
    }
    allowed = KafkaAccess.parse("ssl.ca.location", "")
    assert allowed.service_config(props)["ssl.ca.location"] == "/etc/shadow"
    assert allowed.problems(props)[0].field.endswith("ssl.engine.location")


def test_operator_patterns() -> None:
    access = KafkaAccess.parse(" ssl.*, sasl.kerberos.kinit.cmd ", "SG_.*")
    assert access.allows("ssl.ca.location") and access.allows("sasl.kerberos.kinit.cmd")
    assert not access.allows("sasl.kerberos.keytab")
    assert access.problems({"druid.dynamic.config.provider": PROVIDER}) == []
    refused = KafkaAccess().problems({"druid.dynamic.config.provider": PROVIDER})
    assert [p.field.rsplit(".", 1)[-1] for p in refused] == ["password", "password"]


def test_java_client_properties_become_librdkafka_settings() -> None:
    from tasks.kafka_properties import librdkafka_config

    props = {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="p\\"w d";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----ca",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----me",
        "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----k",
        "ssl.endpoint.identification.algorithm": "",
    }
    assert librdkafka_config(props) == {
        "bootstrap.servers": "b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 'p"w d',
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----ca",
        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----me",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----k",
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_what_librdkafka_cannot_take_stays_for_it_to_refuse() -> None:
    from tasks.kafka_properties import librdkafka_config

    jks = {"ssl.truststore.type": "JKS", "ssl.truststore.location": "/x.jks", "ssl.protocol": "TLS"}
    assert librdkafka_config(jks) == {
        "ssl.truststore.type": "JKS",
        "ssl.truststore.location": "/x.jks",
    }
    kerberos = {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"}
    assert librdkafka_config(kerberos) == kerberos


def test_schema_registries_and_descriptor_files_need_the_operators_leave() -> None:
    registry = {
        "type": "avro_stream",
        "avroBytesDecoder": {"type": "schema_registry", "urls": ["http://reg:8081/apis"]},
    }
    descriptor = {
        "type": "protobuf",
        "protoBytesDecoder": {"type": "file", "descriptor": "file:///etc/protos/w.desc"},
    }
    none = KafkaAccess()
    assert [e.field for e in none.format_problems(registry, "f")] == ["f.avroBytesDecoder.urls[0]"]
    assert "SLUICEGATE_ALLOWED_SCHEMA_LOCATIONS" in none.format_problems(descriptor, "f")[0].reason
    allowed = KafkaAccess.parse("", "", "http://reg:8081/, file:///etc/protos/")
    assert allowed.format_problems(registry, "f") == []
    assert allowed.format_problems(descriptor, "f") == []
    climbing = {
        "type": "protobuf",
        "protoBytesDecoder": {"type": "file", "descriptor": "file:///etc/protos/../shadow"},
    }
    assert len(allowed.format_problems(climbing, "f")) == 1
    elsewhere = {**registry, "avroBytesDecoder": {"type": "schema_registry", "url": "http://evil"}}
    assert len(allowed.format_problems(elsewhere, "f")) == 1
    assert allowed.format_problems({"type": "json"}, "f") == []


def test_schema_locations_are_compared_as_they_will_be_read() -> None:
    allowed = KafkaAccess.parse("", "", "http://registry:8081/apis, file:///etc/protos/")

    def named(location: str) -> bool:
        given = {
            "type": "protobuf",
            "protoBytesDecoder": {"type": "file", "descriptor": location},
        }
        return not allowed.format_problems(given, "f")

    assert named("http://registry:8081/apis/ccompat/v7") and named("/etc/protos/w.desc")
    assert named("file:///etc/protos/sub/w.desc") and named("file://localhost/etc/protos/w")
    for refused in (
        "file:///etc/protos/%2e%2e/%2e%2e/etc/passwd",  # escapes undone before the check
        "/etc/protos/../shadow",
        "/etc/protos-other/w.desc",  # by path segments
        "http://registry:8081@evil.example/apis",  # credentials in a URL
        "http://registry:80811/apis",
        "http://registry.evil.example:8081/apis",
        "https://registry:8081/apis",
        "http://registry:8081/other",
        "ftp://registry/apis",
        "protos/w.desc",  # relative
        "file://otherhost/etc/protos/w.desc",
    ):
        assert not named(refused), refused


def test_a_task_payloads_registry_credentials_are_masked() -> None:
    from supervisor.schemas.secrets import MASK, mask_task

    payload = {
        "ioConfig": {
            "consumerProperties": {"bootstrap.servers": "k:9092"},
            "inputFormat": {
                "type": "kafka",
                "valueFormat": {
                    "type": "avro_stream",
                    "avroBytesDecoder": {
                        "type": "schema_registry",
                        "url": "http://r",
                        "config": {"basic.auth.user.info": "u:pw"},
                    },
                },
                "keyFormat": {
                    "type": "protobuf",
                    "protoBytesDecoder": {"url": "http://r", "headers": {"Cookie": "c"}},
                },
            },
        },
        "dataSchema": {"parser": {"avroBytesDecoder": {"config": {"basic.auth.user.info": "x"}}}},
    }
    masked = mask_task(payload)
    text = str(masked)
    assert "u:pw" not in text and "'c'" not in text and "'x'" not in text
    assert masked["ioConfig"]["inputFormat"]["keyFormat"]["protoBytesDecoder"]["headers"] == {
        "Cookie": MASK
    }
