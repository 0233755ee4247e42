"""supervisor/testkit/network.py, which bench/chaos.py cuts a task host off the overlords with: real
namespaces, a real bridge, real servers on each side."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from supervisor.net import free_port
from supervisor.testkit.network import Network, ip
from supervisor.testkit.waits import wait_for

# names and addresses of the tests' own: a chaos run's network (bench/chaos.py) may be up
PREFIX, SUBNET = "sgt", "10.204.0.0/24"


@pytest.fixture
def network() -> Iterator[Network]:
    net = Network(("overlords", "host-a", "host-b"), SUBNET, PREFIX).up()
    try:
        yield net
    finally:
        net.down()


def serve(net: Network, machine: str | None) -> tuple[subprocess.Popen[bytes], str]:
    """An HTTP server on the machine's address (None: the services' address, outside)."""
    address = net.services if machine is None else net.address(machine)
    port = free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", address]
    server = subprocess.Popen(
        argv if machine is None else net.command(machine, argv),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return server, f"http://{address}:{port}/"


def reaches(net: Network, machine: str | None, url: str) -> bool:
    """Whether a client in the machine (None: outside) gets an answer from url within 2 s."""
    fetch = f"import urllib.request; urllib.request.urlopen({url!r}, timeout=2)"
    argv = [sys.executable, "-c", fetch]
    argv = argv if machine is None else net.command(machine, argv)
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


def test_a_partition_cuts_two_machines_apart_both_ways_and_nothing_else(network: Network) -> None:
    servers = {m: serve(network, m) for m in ("overlords", "host-a", None)}
    try:
        for _, url in servers.values():
            wait_for(lambda url=url: reaches(network, "host-b", url), 30, f"{url} to serve")
        overlords, host_a, services = (servers[m][1] for m in ("overlords", "host-a", None))
        assert reaches(network, "host-a", overlords) and reaches(network, "overlords", host_a)

        network.partition("host-a", "overlords")
        assert not reaches(network, "host-a", overlords)  # its requests are dropped
        assert not reaches(network, "overlords", host_a)  # and so are its answers
        assert reaches(network, "host-a", services)  # the broker, DB, S3, Spark: still there
        assert reaches(network, None, host_a)  # the Spark executors, outside, reach its driver
        assert reaches(network, "host-b", overlords)  # the other host is not cut off
        assert reaches(network, "overlords", services)

        network.heal("host-a", "overlords")
        assert reaches(network, "host-a", overlords) and reaches(network, "overlords", host_a)
        assert network.cut == set()
    finally:
        for server, _ in servers.values():
            server.kill()
            server.wait()


def test_down_removes_every_namespace_and_link_it_made() -> None:
    net = Network(("x", "y"), SUBNET, PREFIX).up()
    assert {net.netns("x"), net.netns("y")} <= set(ip("netns", "list").split())
    assert f"{PREFIX}v1" in ip("-o", "link", "show")
    net.down()
    assert not any(n.startswith(f"{PREFIX}-") for n in ip("netns", "list").split())
    links = ip("-o", "link", "show")
    assert f"{PREFIX}br0" not in links and f"{PREFIX}v1" not in links
