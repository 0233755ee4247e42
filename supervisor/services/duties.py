"""What the leader's per-datasource duties share (retention, table maintenance, compaction):
one datasource at a time, each in a transaction of its own, after checking this overlord still
leads; a datasource whose work fails is logged and left for the next run, the others go on."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

from sqlalchemy.orm import Session

from supervisor.db.engine import SessionFactory
from supervisor.errors import NotLeading
from supervisor.model.fence import Fence

log = logging.getLogger(__name__)
T = TypeVar("T")


def each_datasource(
    sessions: SessionFactory,
    fence: Fence,
    datasources: Iterable[str],
    work: Callable[[Session, str, int | None], T],
    what: str,
) -> dict[str, T]:
    """`work(session, datasource, epoch)` for each datasource, committed; the results that are
    not empty (or zero), by datasource. NotLeading ends the run (from the fence or the work's
    own check of the epoch in its transaction)."""
    done: dict[str, T] = {}
    for datasource in datasources:
        leader = fence.check()  # NotLeading: the run ends
        epoch = None if leader is None else leader.epoch
        try:
            with sessions() as session:
                result = work(session, datasource, epoch)
                session.commit()
        except NotLeading:
            raise
        except Exception:  # the other datasources go on; this one next run
            log.exception("%s: %s failed", datasource, what)
            continue
        if result:
            done[datasource] = result
    return done
