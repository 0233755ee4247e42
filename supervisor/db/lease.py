"""The leader lease's SQL: take it when it is free, renew it while held, give it back.

Every time is the metadata DB's own clock (seconds since the epoch, read inside the statement
that uses it), so overlords whose clocks disagree still agree on who holds the lease. A take
raises the epoch; a renew or release only touches the row while this holder, at this epoch,
still holds it. Each call commits: a lease is worth nothing until others can see it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, Float, literal_column, select, update
from sqlalchemy.orm import Session

from supervisor.db.models import LeaderLeaseRow
from supervisor.errors import NotLeading

LEASE = "overlord"  # the row's name: one control plane per metadata DB


@dataclass(frozen=True)
class LeaseView:
    holder: str
    holder_url: str
    epoch: int
    expires_in_s: float  # negative: expired that long ago


def db_now(session: Session) -> ColumnElement[float]:
    """Now, in seconds since the epoch, on the DB's clock (sub-second on both dialects)."""
    if session.get_bind().dialect.name == "sqlite":
        return literal_column("((julianday('now') - 2440587.5) * 86400.0)", Float)
    return literal_column("extract(epoch from clock_timestamp())", Float)


class LeaseRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def acquire(self, holder: str, holder_url: str, lease_s: float) -> int | None:
        """Take the lease if it has expired; the new epoch, or None while another holds it."""
        now = db_now(self.session)
        taken = self.session.execute(
            update(LeaderLeaseRow)
            .where(LeaderLeaseRow.name == LEASE, LeaderLeaseRow.expires_at_s < now)
            .values(
                holder=holder,
                holder_url=holder_url,
                epoch=LeaderLeaseRow.epoch + 1,
                expires_at_s=now + lease_s,
                acquired_at_s=now,
            )
            .execution_options(synchronize_session=False)
        )
        self.session.commit()
        if getattr(taken, "rowcount", 0) != 1:
            return None
        view = self.current()
        return view.epoch if view is not None and view.holder == holder else None

    def renew(self, holder: str, epoch: int, lease_s: float) -> bool:
        """Extend the lease while no other holder has taken it since (a take raises the epoch:
        a lease that ran out but was not taken is still this holder's); False when it is lost."""
        now = db_now(self.session)
        renewed = self.session.execute(
            update(LeaderLeaseRow)
            .where(
                LeaderLeaseRow.name == LEASE,
                LeaderLeaseRow.holder == holder,
                LeaderLeaseRow.epoch == epoch,
            )
            .values(expires_at_s=now + lease_s)
            .execution_options(synchronize_session=False)
        )
        self.session.commit()
        return getattr(renewed, "rowcount", 0) == 1

    def release(self, holder: str, epoch: int) -> None:
        """Give the lease back (a clean stop): the next overlord need not wait it out."""
        now = db_now(self.session)
        self.session.execute(
            update(LeaderLeaseRow)
            .where(
                LeaderLeaseRow.name == LEASE,
                LeaderLeaseRow.holder == holder,
                LeaderLeaseRow.epoch == epoch,
            )
            .values(expires_at_s=now - 1.0)
            .execution_options(synchronize_session=False)
        )
        self.session.commit()

    def require(self, epoch: int) -> None:
        """Inside the caller's transaction: raise NotLeading unless the lease is still at
        `epoch`. On PostgreSQL the row is share-locked until that transaction ends, so a
        takeover (which raises the epoch) waits for it: a publish checked here commits under
        the epoch it saw or not at all."""
        current = self.session.execute(
            select(LeaderLeaseRow.epoch)
            .where(LeaderLeaseRow.name == LEASE)
            .with_for_update(read=True)
        ).scalar_one_or_none()
        if current != epoch:
            raise NotLeading(
                f"this overlord leads at epoch {epoch}, but the leader lease is at epoch "
                f"{current}: another overlord leads"
            )

    def current(self) -> LeaseView | None:
        row = self.session.execute(
            select(
                LeaderLeaseRow.holder,
                LeaderLeaseRow.holder_url,
                LeaderLeaseRow.epoch,
                LeaderLeaseRow.expires_at_s - db_now(self.session),
            ).where(LeaderLeaseRow.name == LEASE)
        ).one_or_none()
        self.session.commit()
        if row is None:
            return None
        return LeaseView(row[0], row[1], int(row[2]), float(row[3]))
