"""free_port never names a port twice in one process, even when the kernel offers it again."""

from __future__ import annotations

import socket
from collections import deque

import pytest

from supervisor import net


class _Offers:
    """A socket stand-in whose bind(0) yields the ports given, in order."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports

    def __call__(self, *_args: object) -> _Offers:
        return self

    def __enter__(self) -> _Offers:
        return self

    def __exit__(self, *_exc: object) -> None:
        return None

    def bind(self, _address: tuple[str, int]) -> None:
        self.port = self.ports.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_the_kernel_offers_again_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(net, "_RECENT", deque(maxlen=net.RECENT))
    monkeypatch.setattr(net, "_RESERVED", set())
    monkeypatch.setattr(socket, "socket", _Offers([40001, 40001, 40001, 40003]))
    assert net.free_port() == 40001
    assert net.free_port() == 40003


def test_no_new_port_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(net, "_RECENT", deque([40001], maxlen=net.RECENT))
    monkeypatch.setattr(net, "_RESERVED", set())
    monkeypatch.setattr(socket, "socket", _Offers([40001] * net._TRIES))
    with pytest.raises(OSError, match=r"no free port on 127\.0\.0\.1"):
        net.free_port()


def test_real_ports_are_distinct_and_bindable() -> None:
    ports = [net.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    for port in ports[:5]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_reserved_port_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(net, "_RECENT", deque(maxlen=net.RECENT))
    monkeypatch.setattr(net, "_RESERVED", set())
    monkeypatch.setattr(socket, "socket", _Offers([9092, 40005]))
    net.reserve(9092)
    assert net.free_port() == 40005


def test_a_long_lived_process_gets_old_ports_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # An overlord draws a port per task for months: only the ports handed out lately are
    # passed over, so the ephemeral range is never used up.
    monkeypatch.setattr(net, "_RECENT", deque(maxlen=net.RECENT))
    monkeypatch.setattr(net, "_RESERVED", set())
    ports = [*range(30000, 30001 + net.RECENT), 30000]
    monkeypatch.setattr(socket, "socket", _Offers(ports))
    drawn = [net.free_port() for _ in range(net.RECENT + 1)]
    assert len(set(drawn)) == net.RECENT + 1
    assert net.free_port() == 30000  # the first of them, more than RECENT draws ago
