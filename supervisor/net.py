"""Free loopback ports for the embedded services."""

from __future__ import annotations

import socket
import threading

# Ports this process has handed out. A port is free once its probing socket closes, so the
# kernel may offer it again to the next bind: two calls in a row (Kafka's port, then the
# service's) could otherwise name the same port, and the second server fails to bind.
_GIVEN: set[int] = set()
_LOCK = threading.Lock()
_TRIES = 64


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now and that this process has not handed out before."""
    with _LOCK:
        for _ in range(_TRIES):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
            if port not in _GIVEN:
                _GIVEN.add(port)
                return port
    raise OSError(f"no free port on {host} that this process has not handed out already")


def reserve(*ports: int) -> None:
    """Ports named by the operator, which free_port must not hand out for anything else."""
    with _LOCK:
        _GIVEN.update(ports)


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False
