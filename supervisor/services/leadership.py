"""The overlord's hold on the leader lease (supervisor/db/lease.py).

An overlord drives supervisors only while it holds the lease. One thread keeps the lease: the
leader renews it every third of its length; a follower tries to take it as often, and takes it
once it runs out (its holder died, or was paused past it), raising the epoch. `on_elected`
then starts the leader's duties; when a renewal finds the epoch moved (another overlord took
over) `on_lost` stops them at once and the overlord follows again. A renewal the DB does not
answer is tried again; meanwhile `check()`, which every act of the leader passes, refuses once
the lease may have run out on this overlord's own clock (a process paused past its lease
finds so on waking, before its renewer can tell).

`acquire()` is the start-up of a lone overlord (SQLite: one overlord per metadata DB): it
waits out a lease left by an overlord that died without giving it back (up to the lease's
length), and refuses, saying which, when the holder is alive. A clean stop gives the lease
back, so the next overlord need not wait it out.
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
from supervisor.model.fence import Leader

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
        on_elected: Callable[[int], None] = lambda _: None,
    ) -> None:
        self.sessions = sessions
        self.url = url
        self.lease_s = lease_s
        self.on_lost = on_lost
        self.on_elected = on_elected
        self.monotonic = monotonic
        self.holder = f"{url}#{uuid.uuid4().hex[:12]}"  # a restarted overlord is a new holder
        self.epoch: int | None = None
        self.campaigning = False  # a follower: take the lease when it is free
        self._valid_until = 0.0  # monotonic: the lease surely holds until then
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._keep, name="leader-lease", daemon=True)

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
            epoch, current = self._try()
            if epoch is not None:
                self._thread.start()
                return epoch
            if current is not None and seen is not None and _renewed(seen, current):
                raise LeaseHeld(_held(current))
            if self.monotonic() > deadline:
                raise LeaseHeld(_held(current or seen))
            seen = current
            time.sleep(min(0.5, self.lease_s / 4))

    def campaign(self) -> int | None:
        """Take the lease if it is free, else follow: keep trying (as often as a leader
        renews), and lead once it is free, calling `on_elected`. The epoch if taken now (the
        caller starts the duties then; `on_elected` is for later elections)."""
        if self._thread.is_alive():
            raise RuntimeError("the lease is kept once per Leadership")
        self.campaigning = True
        epoch, current = self._try()
        if epoch is None and current is not None:
            log.info("following the overlord at %s (epoch %d)", current.holder_url, current.epoch)
        self._thread.start()
        return epoch

    def check(self) -> Leader:
        """The leader to act as (the Fence every act of this overlord checks): NotLeading
        once the lease is lost, or once it may have run out since the last renewal this
        overlord saw succeed (on its own clock)."""
        epoch = self.epoch
        if epoch is None:
            raise NotLeading("this overlord does not hold the leader lease")
        if self.monotonic() >= self._valid_until:
            raise NotLeading(
                f"this overlord's leader lease (epoch {epoch}) was not renewed in time; "
                "it may have passed to another overlord"
            )
        return Leader(epoch, self.url)

    def leader_url(self) -> str | None:
        """The URL of the overlord that holds the lease now; None when none does."""
        if self.epoch is not None:
            return self.url
        with self.sessions() as session:
            view = LeaseRepository(session).current()
        if view is None or view.expires_in_s <= 0 or not view.holder_url:
            return None
        return view.holder_url

    def halt(self) -> None:
        """Stop keeping the lease (no renewal, no election from now on); still held."""
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.lease_s)

    def release(self) -> None:
        """Stop keeping the lease and give it back."""
        self.halt()
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

    def _try(self) -> tuple[int | None, LeaseView | None]:
        """One attempt to take the lease: the new epoch, else who holds it."""
        sent = self.monotonic()
        with self.sessions() as session:
            repository = LeaseRepository(session)
            epoch = repository.acquire(self.holder, self.url, self.lease_s)
            current = None if epoch is not None else repository.current()
        if epoch is not None:
            self.epoch, self._valid_until = epoch, self._until(sent)
            log.info("leading the metadata DB's overlords at epoch %d", epoch)
        return epoch, current

    def _until(self, sent: float) -> float:
        """Until when a lease renewed by a statement sent at `sent` surely holds: its length
        from the sending, less a margin for the two clocks' rates."""
        return sent + self.lease_s - min(1.0, self.lease_s / 10)

    def _keep(self) -> None:
        interval = self.lease_s / 3
        while not self._stopping.wait(interval):
            try:
                if self.epoch is not None:
                    self._renew(self.epoch)
                elif self.campaigning:
                    epoch, _ = self._try()
                    if epoch is not None and not self._stopping.is_set():
                        self._elected(epoch)
                else:
                    return  # lost, and not a follower: nothing more to keep
            except SQLAlchemyError as exc:  # the DB is away: try again (no other overlord
                log.warning("leader lease not kept: %s", exc)  # can take over while it is)
            except Exception:
                log.exception("keeping the leader lease failed")

    def _elected(self, epoch: int) -> None:
        """Start leading; if that fails, give the lease back (a holder that drives nothing
        would keep every overlord from leading) and try again later."""
        try:
            self.on_elected(epoch)
        except Exception:
            log.exception("could not start leading at epoch %d: giving the lease back", epoch)
            self.epoch = None
            with self.sessions() as session:
                LeaseRepository(session).release(self.holder, epoch)

    def _renew(self, epoch: int) -> None:
        sent = self.monotonic()
        with self.sessions() as session:
            held = LeaseRepository(session).renew(self.holder, epoch, self.lease_s)
        if held:
            self._valid_until = self._until(sent)
            return
        self.epoch = None
        log.error(
            "lost the leader lease (epoch %d) to another overlord: this overlord stops "
            "driving supervisors%s",
            epoch,
            " and follows" if self.campaigning else "; restart it to lead again",
        )
        self.on_lost()


def _renewed(before: LeaseView, after: LeaseView) -> bool:
    """Whether the lease was renewed or taken between two looks: its holder is alive."""
    return after.holder != before.holder or after.expires_in_s > before.expires_in_s + 0.05


def _held(view: LeaseView | None) -> str:
    who = view.holder_url if view is not None and view.holder_url else "another overlord"
    return (
        f"another overlord ({who}) leads this metadata DB; on SQLite one overlord serves a "
        "metadata DB (several, one leading, share a PostgreSQL one)"
    )
