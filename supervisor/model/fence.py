"""Fencing: what an overlord proves it still leads with (the leader lease's epoch).

The leader's epoch travels with every command it sends to tasks (which refuse an epoch older
than the newest they have seen) and is checked in the transaction of every publish and
checkpoint request it handles; before it kills or launches a task it checks that its lease
has not run out on its own clock. A deposed leader (paused past its lease, then woken)
therefore changes nothing: each of these refuses, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from supervisor.errors import NotLeading

__all__ = ["UNFENCED", "Fence", "Leader", "NotLeading", "Unfenced"]


@dataclass(frozen=True)
class Leader:
    """Who acts: the lease's epoch, and the leader's URL (tasks learn where to publish)."""

    epoch: int
    url: str


class Fence(Protocol):
    def check(self) -> Leader | None:
        """The leader to act as; raises NotLeading when this overlord may not act. None: no
        lease is kept (a reconciler built on its own, in tests)."""
        ...


class Unfenced:
    """No lease: every act is allowed and carries no epoch."""

    def check(self) -> Leader | None:
        return None


UNFENCED = Unfenced()
