"""The overlord's hold on the leader lease (supervisor/db/lease.py).

An overlord drives supervisors only while it holds the lease. At start-up it takes the lease,
waiting out one left by an overlord that died without giving it back (up to the lease's
length); a lease that is renewed meanwhile belongs to a live overlord, and this one refuses to
start, saying which. A thread renews the lease every third of its length; when a renewal finds
the epoch moved (another overlord took over, as after this one was paused past its lease) the
overlord stops driving supervisors at once (`on_lost`) and says so. A renewal the DB does not
answer is tried again (an overlord cut off from the DB while another reaches it is covered
once commands and publishes carry the epoch: not yet). A clean stop gives the lease back.

Followers (an overlord that waits for the lease and serves reads meanwhile) are not built
yet: a second overlord on the same metadata DB refuses to start.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from sqlalchemy.exc import SQLAlchemyError

from supervisor.db.engine import SessionFactory
from supervisor.db.lease import LeaseRepository, LeaseView
from supervisor.errors import NotLeading

log = logging.getLogger(__name__)


class LeaseHeld(RuntimeError):
    """Another overlord, alive, holds the lease."""


class Leadership:
    def __init__(
        self,
        sessions: SessionFactory,
        url: str,
        lease_s: float,
        on_lost: Callable[[], None] = lambda: None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sessions = sessions
        self.url = url
        self.lease_s = lease_s
        self.on_lost = on_lost
        self.monotonic = monotonic
        self.holder = f"{url}#{uuid.uuid4().hex[:12]}"  # a restarted overlord is a new holder
        self.epoch: int | None = None
        self._valid_until = 0.0  # monotonic: the lease surely holds until then
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="leader-lease", daemon=True)

    @property
    def leading(self) -> bool:
        return self.epoch is not None

    def acquire(self) -> int:
        """Take the lease (waiting out an abandoned one) and start renewing it; the epoch."""
        if self.epoch is not None or self._thread.is_alive():
            raise RuntimeError("the lease is taken once per Leadership")
        deadline = self.monotonic() + self.lease_s + 2.0
        seen: LeaseView | None = None
        while True:
            sent = self.monotonic()
            with self.sessions() as session:
                repository = LeaseRepository(session)
                epoch = repository.acquire(self.holder, self.url, self.lease_s)
                current = None if epoch is not None else repository.current()
            if epoch is not None:
                self.epoch, self._valid_until = epoch, self._until(sent)
                log.info("leading the metadata DB's overlords at epoch %d", epoch)
                self._thread.start()
                return epoch
            if current is not None and seen is not None and _renewed(seen, current):
                raise LeaseHeld(_held(current))
            if self.monotonic() > deadline:
                raise LeaseHeld(_held(current or seen))
            seen = current
            time.sleep(min(0.5, self.lease_s / 4))

    def check(self) -> int:
        """The epoch to act under (the Fence this overlord's acts check): NotLeading once
        the lease is lost, or once it may have run out since the last renewal this overlord
        saw succeed (its own clock: a process paused past its lease finds it so on waking,
        before its renewer can tell)."""
        epoch = self.epoch
        if epoch is None:
            raise NotLeading("this overlord does not hold the leader lease")
        if self.monotonic() >= self._valid_until:
            raise NotLeading(
                f"this overlord's leader lease (epoch {epoch}) was not renewed in time; "
                "it may have passed to another overlord"
            )
        return epoch

    def _until(self, sent: float) -> float:
        """Until when a lease renewed by a statement sent at `sent` surely holds: its length
        from the sending, less a margin for the two clocks' rates."""
        return sent + self.lease_s - min(1.0, self.lease_s / 10)

    def release(self) -> None:
        """Stop renewing and give the lease back."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(self.lease_s)
        epoch, self.epoch = self.epoch, None
        if epoch is None:
            return
        try:
            with self.sessions() as session:
                LeaseRepository(session).release(self.holder, epoch)
        except SQLAlchemyError as exc:  # it expires by itself
            log.warning(
                "the leader lease was not given back (it expires in %.0f s): %s", self.lease_s, exc
            )

    def _renew(self) -> None:
        interval = self.lease_s / 3
        while not self._stopping.wait(interval):
            epoch = self.epoch
            if epoch is None:
                return
            sent = self.monotonic()
            try:
                with self.sessions() as session:
                    held = LeaseRepository(session).renew(self.holder, epoch, self.lease_s)
            except Exception as exc:  # the DB is away: try again (no other overlord can take
                log.warning("leader lease not renewed: %s", exc)  # over while it is)
                continue
            if held:
                self._valid_until = self._until(sent)
                continue
            if not held:
                self.epoch = None
                log.error(
                    "lost the leader lease (epoch %d): this overlord stops driving supervisors; "
                    "restart it to lead again once the lease is free",
                    epoch,
                )
                try:
                    self.on_lost()
                except Exception:
                    log.exception("stopping after the lease was lost failed")
                return


def _renewed(before: LeaseView, after: LeaseView) -> bool:
    """Whether the lease was renewed or taken between two looks: its holder is alive."""
    return after.holder != before.holder or after.expires_in_s > before.expires_in_s + 0.05


def _held(view: LeaseView | None) -> str:
    who = view.holder_url if view is not None and view.holder_url else "another overlord"
    return (
        f"another overlord ({who}) leads this metadata DB: one overlord per metadata DB "
        "(several, one leading, are not supported yet)"
    )
