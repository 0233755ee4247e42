"""The leader lease on the metadata DB (SQLite and PostgreSQL): taken when free, renewed while
held, lost to a newer epoch; an overlord that finds a live holder refuses to start, one that
finds an abandoned lease waits it out, and a clean stop gives it back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from supervisor.db.engine import SessionFactory, make_engine, migrate, session_factory
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import LeaderLeaseRow
from supervisor.errors import NotLeading
from supervisor.net import free_port, wait_for_port
from supervisor.services.leadership import Leadership, LeaseHeld


def _sluicegate() -> str:
    return str(Path(sys.executable).parent / "sluicegate")


@pytest.fixture
def sessions(metadata_url: str) -> Iterator[SessionFactory]:
    engine = make_engine(metadata_url)
    migrate(engine)
    yield session_factory(engine)
    engine.dispose()


def test_the_lease_is_taken_when_free_renewed_while_held_and_lost_to_a_newer_epoch(
    sessions: SessionFactory,
) -> None:
    with sessions() as session:
        leases = LeaseRepository(session)
        assert leases.acquire("a", "http://a", 0.6) == 1
        assert leases.acquire("b", "http://b", 0.6) is None  # held
        assert leases.renew("a", 1, 0.6)
        view = leases.current()
        assert view is not None and view.holder == "a" and view.epoch == 1
        assert view.expires_in_s <= 0.6
        time.sleep(0.8)  # a's lease runs out unrenewed
        assert leases.renew("a", 1, 0.6)  # out, but nobody took it: still a's
        time.sleep(0.8)
        assert leases.acquire("b", "http://b", 30) == 2
        assert not leases.renew("a", 1, 0.6)  # a was deposed: its renewals fail
        leases.release("a", 1)  # a's release touches nothing of b's
        assert leases.acquire("a", "http://a", 30) is None
        leases.release("b", 2)
        assert leases.acquire("a", "http://a", 30) == 3


def test_a_second_overlord_refuses_while_the_first_renews(sessions: SessionFactory) -> None:
    first = Leadership(sessions, "http://first", lease_s=1.0)
    assert first.acquire() == 1
    began = time.monotonic()
    with pytest.raises(LeaseHeld, match=r"another overlord \(http://first\) leads"):
        Leadership(sessions, "http://second", lease_s=1.0).acquire()
    assert time.monotonic() - began < 3.5  # told as soon as a renewal shows the holder alive
    first.release()
    second = Leadership(sessions, "http://second", lease_s=1.0)
    assert second.acquire() == 2
    second.release()


def test_a_lease_left_by_a_dead_overlord_is_waited_out(sessions: SessionFactory) -> None:
    with sessions() as session:  # taken, never renewed nor released: its holder died
        assert LeaseRepository(session).acquire("dead", "http://dead", 1.5) == 1
    began = time.monotonic()
    second = Leadership(sessions, "http://second", lease_s=1.5)
    assert second.acquire() == 2
    assert 0.5 < time.monotonic() - began < 4.0
    second.release()


def test_a_leader_whose_lease_may_have_run_out_refuses_to_act(sessions: SessionFactory) -> None:
    now = [100.0]  # the overlord's monotonic clock, stopped (as in a SIGSTOP) and moved
    leader = Leadership(sessions, "http://leader", lease_s=30.0, monotonic=lambda: now[0])
    assert leader.acquire() == 1
    assert leader.check().epoch == 1
    now[0] += 28.5  # within the lease, less its margin
    assert leader.check().epoch == 1
    now[0] += 1.0  # past it, no renewal seen: another overlord may lead by now
    with pytest.raises(NotLeading, match=r"epoch 1\) was not renewed in time"):
        leader.check()
    leader.release()
    with pytest.raises(NotLeading, match="does not hold the leader lease"):
        leader.check()


def test_a_leader_that_loses_the_lease_stops_at_once(sessions: SessionFactory) -> None:
    lost = threading.Event()
    leader = Leadership(sessions, "http://leader", lease_s=1.0, on_lost=lost.set)
    assert leader.acquire() == 1
    with sessions() as session:  # another overlord took over (as after a long pause)
        session.execute(update(LeaderLeaseRow).values(holder="other", epoch=2))
        session.commit()
    assert lost.wait(3.0)
    assert not leader.leading
    leader.release()  # gives back nothing: the lease is the other's
    with sessions() as session:
        view = LeaseRepository(session).current()
    assert view is not None and view.holder == "other" and view.epoch == 2


def _serve(port: int, tmp_path: Path, lease_s: float) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SLUICEGATE_METADATA_URL": f"sqlite:///{tmp_path / 'meta.db'}",
        "SLUICEGATE_LEASE_S": str(lease_s),
        "SLUICEGATE_DEEP_STORAGE": str(tmp_path / "seg"),
        "SLUICEGATE_WORK_DIR": str(tmp_path / f"work{port}"),
    }
    return subprocess.Popen(
        [_sluicegate(), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_serve_refuses_a_metadata_db_another_overlord_leads(tmp_path: Path) -> None:
    first_port = free_port()
    first = _serve(first_port, tmp_path, lease_s=30)
    try:
        assert wait_for_port("127.0.0.1", first_port, 60), "the first overlord did not listen"
        second = _serve(free_port(), tmp_path, lease_s=30)
        output = second.communicate(timeout=60)[0]
        assert second.returncode == 1, output
        assert output.splitlines()[-1] == (
            f"error: another overlord (http://127.0.0.1:{first_port}) leads this metadata DB; "
            "on SQLite one overlord serves a metadata DB (several, one leading, share a "
            "PostgreSQL one)"
        )
        assert httpx.get(f"http://127.0.0.1:{first_port}/status/health").json() is True
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    # the first gave the lease back: the next overlord starts without waiting out 30 s
    began = time.monotonic()
    third_port = free_port()
    third = _serve(third_port, tmp_path, lease_s=30)
    try:
        assert wait_for_port("127.0.0.1", third_port, 25), "the lease was not given back"
        assert time.monotonic() - began < 25
    finally:
        third.send_signal(signal.SIGTERM)
        third.communicate(timeout=60)
