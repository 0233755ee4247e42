"""A task's offset lookups ride out errors that pass (tasks/kafka_offsets.py)."""

from __future__ import annotations

import gc
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from tasks import kafka_offsets
from tasks.kafka_offsets import OffsetReader


class Answer:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class FlakyAdmin:
    """list_offsets answers `errors` in turn, then the offset 42 for every partition."""

    def __init__(self, errors: list[int]) -> None:
        self.errors = list(errors)
        self.asked = 0
        self.refreshed: list[str] = []  # topics whose metadata was asked for

    def list_topics(self, topic: str, **_: Any) -> None:
        self.refreshed.append(topic)

    def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
        self.asked += 1
        answers: dict[Any, Future[Any]] = {}
        for partition in request:
            future: Future[Any] = Future()
            if self.errors:
                future.set_exception(KafkaException(KafkaError(self.errors[0])))
            else:
                future.set_result(Answer(42))
            answers[partition] = future
        if self.errors:
            self.errors.pop(0)
        return answers


def reader(
    admin: FlakyAdmin, monkeypatch: pytest.MonkeyPatch, timeout: float = 5.0
) -> OffsetReader:
    monkeypatch.setattr(kafka_offsets, "RETRY_S", 0.01)
    offsets = OffsetReader({"bootstrap.servers": "127.0.0.1:9"}, timeout, retry_transient=True)
    offsets.admin = admin  # type: ignore[assignment]
    return offsets


def test_errors_that_pass_are_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A topic the broker does not know yet, a partition without a leader yet: asked again
    until it answers (one of them failed a task created right after its topic)."""
    admin = FlakyAdmin([KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE])
    assert reader(admin, monkeypatch).latest("t", ["0", "1"]) == {"0": 42, "1": 42}
    assert admin.asked == 3


def test_other_errors_and_errors_past_the_timeout_are_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = FlakyAdmin([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        reader(refused, monkeypatch).latest("t", ["0"])
    assert refused.asked == 1
    lasting = FlakyAdmin([KafkaError.LEADER_NOT_AVAILABLE] * 1000)
    with pytest.raises(KafkaException):
        reader(lasting, monkeypatch, timeout=0.2).earliest("t", ["0"])
    assert 1 < lasting.asked < 1000
    monkeypatch.setattr(kafka_offsets, "RETRY_S", 0.01)
    probe = OffsetReader({"bootstrap.servers": "127.0.0.1:9"})  # the overlord's: answers at once
    probe.admin = FlakyAdmin([KafkaError.LEADER_NOT_AVAILABLE])  # type: ignore[assignment]
    with pytest.raises(KafkaException):
        probe.latest("t", ["0"])


def test_an_admin_client_is_made_when_first_asked_for_and_then_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """record_times (each /metrics scrape's lag in time) needs no admin client, and a client
    connects to the brokers as soon as it is made."""
    made = fake_clients(monkeypatch)
    offsets = OffsetReader({"bootstrap.servers": "127.0.0.1:9"})
    assert made == []
    assert offsets.admin is offsets.admin is made[0]
    assert [c.config["bootstrap.servers"] for c in made] == ["127.0.0.1:9"]


class FakeClient:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config


def fake_clients(
    monkeypatch: pytest.MonkeyPatch, now: list[float] | None = None, errors: tuple[int, ...] = ()
) -> list[Any]:
    """Admin clients made as FakeClients (FlakyAdmins answering `errors` when given), and a
    SharedAdmins of their own whose clock is `now[0]`."""
    made: list[Any] = []
    clock = now if now is not None else [0.0]

    def make(config: dict[str, Any]) -> Any:
        made.append(FlakyAdmin(list(errors)) if errors else FakeClient(config))
        return made[-1]

    monkeypatch.setattr(kafka_offsets, "AdminClient", make)
    monkeypatch.setattr(
        kafka_offsets, "SHARED_ADMINS", kafka_offsets.SharedAdmins(lambda: clock[0])
    )
    return made


def test_shared_readers_of_one_cluster_ask_through_one_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tasks of a host application: one admin client per cluster, not one a task."""
    made = fake_clients(monkeypatch)
    one = {"bootstrap.servers": "127.0.0.1:9"}
    tasks = [OffsetReader(one, shared=True) for _ in range(3)]
    other = OffsetReader({**one, "security.protocol": "SSL"}, shared=True)
    alone = OffsetReader(one)
    assert {id(t.admin) for t in tasks} == {id(made[0])}
    assert other.admin is not made[0] and alone.admin is not made[0]
    assert len(made) == 3


def test_a_stale_shared_client_is_replaced_once_for_all_its_readers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader whose retries ran out makes a new client (the old one's metadata cache kept
    saying "No leaders found"); the others ask through it too, and a second reader that found
    the same client stale does not make another."""
    now = [0.0]
    made = fake_clients(monkeypatch, now)
    first, second = (OffsetReader({"bootstrap.servers": "127.0.0.1:9"}, shared=True) for _ in "ab")
    stale = first.admin
    assert second.admin is stale
    now[0] = kafka_offsets.RENEW_AFTER_S - 1
    first._renew()  # younger than RENEW_AFTER_S: kept
    assert first.admin is stale and len(made) == 1
    now[0] = kafka_offsets.RENEW_AFTER_S
    first._renew()
    assert first.admin is second.admin is made[1] is not stale
    second._admin = stale  # it too found the old one stale, before it saw the new one
    second._renew()
    assert second.admin is made[1] and len(made) == 2


def test_a_shared_client_goes_with_its_last_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    made = fake_clients(monkeypatch)
    reader = OffsetReader({"bootstrap.servers": "127.0.0.1:9"}, shared=True)
    assert reader.admin is made[0]
    del reader, made[:]
    gc.collect()
    assert len(kafka_offsets.SHARED_ADMINS.clients) == 0


def test_a_clients_stale_metadata_is_asked_for_afresh_and_at_last_the_client_renewed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a client says from its own metadata cache ("No leaders found"; "Unknown
    partition": one added since it last asked) has it ask for the topic's metadata before
    asking again, and past the retries the next ask is with a new client. A topic the broker
    says is gone: the same client, nothing asked for afresh."""
    monkeypatch.setattr(kafka_offsets, "RETRY_S", 0.01)
    cases = (
        (KafkaError._NOENT, True),
        (KafkaError._UNKNOWN_PARTITION, True),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, False),
    )
    for code, stale in cases:
        now = [0.0]
        made = fake_clients(monkeypatch, now, errors=(code,) * 1000)
        reader = OffsetReader({"bootstrap.servers": "127.0.0.1:9"}, 0.1, True, shared=True)
        first = reader.admin
        now[0] = kafka_offsets.RENEW_AFTER_S
        with pytest.raises(KafkaException):
            reader.latest("t", [0])
        assert (reader.admin is not first) is stale and len(made) == 1 + stale, code
        assert first.refreshed == (["t"] * first.asked if stale else []), code


def test_a_client_given_outright_is_the_readers_own(monkeypatch: pytest.MonkeyPatch) -> None:
    made = fake_clients(monkeypatch)
    reader = OffsetReader({"bootstrap.servers": "127.0.0.1:9"}, shared=True)
    own = FakeClient({})
    reader.admin = own  # type: ignore[assignment]
    assert reader.admin is own and made == []
