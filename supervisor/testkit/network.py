"""A private network of Linux network namespaces, so a chaos run can cut one machine off.

Every process of a run otherwise shares loopback, and nothing can come between two of them.
Here each "machine" that a partition may separate (the overlords, each task host) runs in a
network namespace of its own, attached by a veth pair to a bridge in this namespace; the
shared services (broker, PostgreSQL, S3, the Spark cluster) listen on the bridge's address.
Only private addresses of this machine's own making are used (10.203.0.0/24 by default),
never a real interface.

`partition(machine, other)` cuts the two apart both ways while each still reaches everything
else: `machine` is given a blackhole route to `other`'s address, so whatever it sends there,
a request or the answer to one, is dropped (a TCP peer sees timeouts, as in a real
partition). `heal` removes the route. Needs root (CAP_NET_ADMIN) and `ip` (iproute2).

One network of a prefix at a time on a machine: `up` removes what an earlier one of its
prefix left behind (a test uses a prefix and subnet of its own, beside a chaos run's).
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass, field

PREFIX = "sgc"  # of every name a network makes: namespaces sgc-<machine>, the bridge, the veths


class NetworkError(RuntimeError):
    """An `ip` command failed."""


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    command = ["ip", *args] if netns is None else ["ip", "netns", "exec", netns, "ip", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NetworkError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


@dataclass
class Network:
    """The bridge (the services' address, .1) and a namespace per machine (.5, .6, ... in the
    order given). `address(name)` and `netns(name)` say where a machine is; `command(name,
    argv)` runs argv inside it."""

    machines: tuple[str, ...]
    subnet: str = "10.203.0.0/24"
    prefix: str = PREFIX  # at most 10 characters: an interface name has 15
    addresses: dict[str, str] = field(default_factory=dict)
    cut: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.bridge = f"{self.prefix}br0"
        hosts = list(ipaddress.ip_network(self.subnet).hosts())
        self.services = str(hosts[0])
        self.prefix_len = ipaddress.ip_network(self.subnet).prefixlen
        for index, name in enumerate(self.machines):
            self.addresses[name] = str(hosts[4 + index])

    def netns(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def address(self, name: str) -> str:
        return self.addresses[name]

    def command(self, name: str, argv: list[str]) -> list[str]:
        """argv run in the machine's namespace (`ip netns exec` execs it: same pid)."""
        return ["ip", "netns", "exec", self.netns(name), *argv]

    def up(self) -> Network:
        clean(self.prefix)
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.services}/{self.prefix_len}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for index, name in enumerate(self.machines):
            ns, outside, inside = (
                self.netns(name),
                f"{self.prefix}v{index}",
                f"{self.prefix}i{index}",
            )
            ip("netns", "add", ns)
            ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            ip("link", "set", inside, "netns", ns)
            ip("link", "set", outside, "master", self.bridge)
            ip("link", "set", outside, "up")
            ip("link", "set", "lo", "up", netns=ns)
            ip("addr", "add", f"{self.address(name)}/{self.prefix_len}", "dev", inside, netns=ns)
            ip("link", "set", inside, "up", netns=ns)
        return self

    def partition(self, machine: str, other: str) -> None:
        """Nothing passes between `machine` and `other` until `heal`."""
        ip("route", "add", "blackhole", f"{self.address(other)}/32", netns=self.netns(machine))
        self.cut.add((machine, other))

    def heal(self, machine: str, other: str) -> None:
        ip("route", "del", "blackhole", f"{self.address(other)}/32", netns=self.netns(machine))
        self.cut.discard((machine, other))

    def down(self) -> None:
        clean(self.prefix)


def clean(prefix: str = PREFIX) -> None:
    """Remove every namespace, bridge and veth a network of `prefix` made (a namespace's
    processes must be gone first; its veth goes with it)."""
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(f"{prefix}-"):
            ip("netns", "del", name, check=False)
    for line in ip("-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            name = parts[1].strip().split("@")[0]
            if name.startswith((f"{prefix}br", f"{prefix}v", f"{prefix}i")):
                ip("link", "del", name, check=False)
