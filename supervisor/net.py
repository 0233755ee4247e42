"""Free loopback ports for the embedded services."""

from __future__ import annotations

import socket
import threading
from collections import deque

# A port is free once its probing socket closes, so the kernel may offer it again to the next
# bind: two calls in a row (Kafka's port, then the service's) could otherwise name the same
# port, and the second server fails to bind. So the ports handed out lately are passed over.
# Only lately: an overlord draws a port for every task it launches, and a set of all of them
# would grow for months and at last hold the whole ephemeral range.
RECENT = 1024
_RECENT: deque[int] = deque(maxlen=RECENT)
_RESERVED: set[int] = set()  # named by the operator, passed over for good
_LOCK = threading.Lock()
_TRIES = 64


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, not reserved and not among those handed out lately."""
    with _LOCK:
        for _ in range(_TRIES):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port = int(sock.getsockname()[1])
            if port not in _RESERVED and port not in _RECENT:
                _RECENT.append(port)
                return port
    raise OSError(f"no free port on {host} that this process has not handed out already")


def reserve(*ports: int) -> None:
    """Ports named by the operator, which free_port must not hand out for anything else."""
    with _LOCK:
        _RESERVED.update(ports)


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
