"""Where the leader runs tasks: on the task hosts (`sluicegate worker`) whose heartbeats are
recent, else on its own host, as before any registered (LocalProcessRunner or SharedAppRunner).

Placement is Druid's equalDistribution: the live, enabled host with the most free capacity,
and the replicas of one task group on different hosts when there are enough of them (Druid
keeps an extra replica pending; here it shares a host rather than wait). A host that stops
heartbeating for `worker_timeout_s` has its tasks recorded as failed: the supervisors replace
them elsewhere, and when the host comes back, the tasks it still runs that the metadata DB
no longer counts as running are killed. Nothing they wrote can be published twice: every
publish checks the committed offsets it starts from.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import select

from supervisor.clients.worker_api import WorkerApiError, WorkerClient
from supervisor.clock import Clock
from supervisor.db.engine import SessionFactory
from supervisor.db.models import TaskRow, WorkerRow
from supervisor.db.workers import WorkerRepository
from supervisor.runner.local import LocalProcessRunner
from supervisor.runner.protocol import Exited, Launched, NoSlot
from supervisor.runner.shared import SharedAppRunner
from supervisor.settings import Settings
from tasks.protocol import AnyTask, TaskReport, TaskStatusCode

log = logging.getLogger(__name__)
SYNC_S = 0.5  # each live host's tasks are asked for this often
FORGOTTEN_S = 300.0  # a host silent this long no longer counts as registered at all


class ClusterRunner:
    def __init__(
        self,
        settings: Settings,
        local: LocalProcessRunner | SharedAppRunner,
        sessions: Callable[[], SessionFactory],
        clock: Clock,
    ) -> None:
        self.local = local
        self.sessions = sessions
        self.clock = clock
        self.timeout = timedelta(seconds=settings.worker_timeout_s)
        self.placed: dict[str, str] = {}  # task id -> its host, for tasks on task hosts
        self.placed_at: dict[str, float] = {}
        self.running: dict[str, set[str]] = {}  # host -> the tasks it ran at its last sync
        self.synced_at: dict[str, float] = {}  # host -> when its last sync asked (monotonic)
        self.ended: list[Exited] = []
        self.clients: dict[str, tuple[str, WorkerClient]] = {}  # host -> (token, client)
        self.lock = threading.RLock()
        self.synced = 0.0

    # ---- the hosts -------------------------------------------------------------------------

    def _hosts(self) -> tuple[list[WorkerRow], dict[str, list[TaskRow]], datetime]:
        """Every host heard from lately, and the running tasks placed on hosts."""
        with self.sessions()() as session:
            repo = WorkerRepository(session)
            rows, placed = repo.all(), repo.running_tasks()
            session.expunge_all()
        now = self.clock()
        recent = [r for r in rows if r.heard_within(timedelta(seconds=FORGOTTEN_S), now)]
        return recent, placed, now

    def _fresh(self, row: WorkerRow, now: datetime) -> bool:
        """Heard from within the timeout (enabled or not)."""
        return row.heard_within(self.timeout, now)

    def _alive(self, row: WorkerRow, now: datetime) -> bool:
        """Fresh and enabled: it may be given tasks."""
        return row.enabled and self._fresh(row, now)

    def _client(self, row: WorkerRow) -> WorkerClient:
        with self.lock:
            known = self.clients.get(row.host)
            if known is not None and known[0] == row.token:
                return known[1]
            # a new token (the host restarted with a new work directory): a new client; the old
            # one may be in use by another thread, and is left to be collected
            client = WorkerClient(row)
            self.clients[row.host] = (row.token, client)
            return client

    def uses_hosts(self) -> bool:
        return bool(self._hosts()[0])

    # ---- Runner ----------------------------------------------------------------------------

    def launch(self, task: AnyTask) -> Launched:
        hosts, placed, now = self._hosts()
        if not hosts:
            return self.local.launch(task)
        alive = [r for r in hosts if self._alive(r, now)]
        if not alive:
            raise NoSlot(f"no task host is alive and enabled ({len(hosts)} registered)")
        ranked = self._rank(task, alive, placed)
        failures = []
        for row in ranked[:3]:
            with self.lock:  # the slot is taken before the call: launches at once never share it
                self.placed[task.id] = row.host
                # placed when the host answers: a sync that asks before it does must not take
                # the task for gone
                self.placed_at[task.id] = math.inf
            try:
                where = self._client(row).assign(task)
            except WorkerApiError as exc:
                with self.lock:
                    self.placed.pop(task.id, None)
                    self.placed_at.pop(task.id, None)
                failures.append(str(exc))
                if exc.status_code is None:  # no answer: it may have started all the same
                    self._shutdown(row, task.id)
                continue
            with self.lock:
                self.placed_at[task.id] = time.monotonic()
            return Launched(
                where.host,
                where.port,
                where.logPath,
                where.token,
                where.scheme,
                worker=row.host,
            )
        raise OSError("; ".join(failures))

    def _rank(
        self, task: AnyTask, alive: list[WorkerRow], placed: dict[str, list[TaskRow]]
    ) -> list[WorkerRow]:
        """The hosts to try, best first: with free capacity, not holding a replica of the
        task's group when some do not, the most free capacity first."""
        with self.lock:
            ids: dict[str, set[str]] = {r.host: set() for r in alive}
            groups: dict[str, set[tuple[str | None, int | None]]] = {r.host: set() for r in alive}
            for host, task_rows in placed.items():
                for task_row in task_rows:
                    ids.setdefault(host, set()).add(task_row.id)
                    groups.setdefault(host, set()).add((task_row.supervisor_id, task_row.group_id))
            for task_id, host in self.placed.items():  # launched here, maybe not committed yet
                ids.setdefault(host, set()).add(task_id)
            free = {r.host: r.capacity - len(ids[r.host]) for r in alive}
            open_hosts = [r for r in alive if free[r.host] > 0]
            if not open_hosts:
                raise NoSlot(f"no task host has free capacity ({len(alive)} alive, all full)")
            group = (task.supervisorId, task.group_id)
            apart = [r for r in open_hosts if group not in groups[r.host]]
            return sorted(apart or open_hosts, key=lambda r: (-free[r.host], r.host))

    def _shutdown(self, row: WorkerRow, task_id: str) -> None:
        try:
            self._client(row).shutdown(task_id)
        except WorkerApiError as exc:
            log.warning("task %s not shut down on %s: %s", task_id, row.host, exc)

    def prepare(self) -> None:
        """This host's runner, when tasks run here (no task host is registered)."""
        if not self.uses_hosts():
            self.local.prepare()

    def release(self) -> None:
        self.local.release()

    def is_running(self, task_id: str) -> bool:
        with self.lock:
            host = self.placed.get(task_id)
            if host is None:
                return self.local.is_running(task_id)
            if task_id in self.running.get(host, ()):
                return True
            # not seen yet: running, until a sync of its host asked after it was placed says
            return self.synced_at.get(host, 0.0) <= self.placed_at.get(task_id, 0.0)

    def kill(self, task_id: str) -> bool:
        with self.lock:
            host = self.placed.pop(task_id, None)
            self.placed_at.pop(task_id, None)
        if host is None:
            return self.local.kill(task_id)
        row = self._row(host)
        if row is None:
            return True
        try:
            return self._client(row).shutdown(task_id)
        except WorkerApiError as exc:
            # unreachable: recorded as killed; should it run on, the host kills it when it is
            # back (its stray tasks), and its publish cannot go through twice
            log.warning("task %s not killed on its host: %s", task_id, exc)
            return True

    def _row(self, host: str) -> WorkerRow | None:
        with self.sessions()() as session:
            row = WorkerRepository(session).get(host)
            if row is not None:
                session.expunge(row)
            return row

    def _host_of(self, task_id: str) -> str | None:
        with self.lock:
            if task_id in self.placed:
                return self.placed[task_id]
        with self.sessions()() as session:
            return session.scalar(select(TaskRow.worker).where(TaskRow.id == task_id))

    def adopt(self, task_id: str) -> bool:
        host = self._host_of(task_id)
        if host is None:
            return self.local.adopt(task_id)
        row = self._row(host)
        if row is None or not self._fresh(row, self.clock()):
            return False  # its host is lost: recorded as failed, as the sync would
        # no call to the host here (a new leader adopts on the lease's thread): the first sync
        # of the host reports the task if it has ended meanwhile
        with self.lock:
            self.placed[task_id] = host
            self.placed_at[task_id] = time.monotonic()
        return True

    def located(self, task_id: str) -> Launched | None:
        """A task of this host's runner; one on a task host is found by its host's sync."""
        return self.local.located(task_id) if self._host_of(task_id) is None else None

    def report(self, task_id: str) -> TaskReport | None:
        host = self._host_of(task_id)
        if host is None:
            return self.local.report(task_id)
        row = self._row(host)
        if row is None or not self._fresh(row, self.clock()):
            return None
        return self._fetch_report(row, task_id)

    def _fetch_report(self, row: WorkerRow, task_id: str) -> TaskReport | None:
        try:
            return self._client(row).report(task_id)
        except WorkerApiError:
            return None

    def exited(self) -> list[Exited]:
        done = self.local.exited()
        if time.monotonic() >= self.synced + SYNC_S:
            self._sync()
        with self.lock:
            done += self.ended
            self.ended = []
        return done

    def _sync(self) -> None:
        """Each recent host's tasks: the ended ones reported, a silent host's failed, and
        tasks a host runs that the metadata DB no longer counts as running killed."""
        hosts, placed, now = self._hosts()
        began = time.monotonic()
        with self.lock:
            mine = dict(self.placed)
        known = {row.host for row in hosts}
        for host in sorted(set(mine.values()) - known):  # silent for long, or gone from the DB
            self._lost(host, [t for t, h in mine.items() if h == host])
        for row in hosts:
            on_host = [t for t, h in mine.items() if h == row.host]
            if not row.heard_within(self.timeout, now):  # (a disabled host is still synced)
                self._lost(row.host, on_host)
                continue
            asked = time.monotonic()
            try:
                state = self._client(row).state()
            except WorkerApiError as exc:
                log.debug("task host %s not synced: %s", row.host, exc)
                continue
            running = set(state.running)
            exits = {e.task: e for e in state.exited}
            with self.lock:
                self.running[row.host] = running
                self.synced_at[row.host] = asked
                gone = [
                    t
                    for t in on_host
                    if t in self.placed and t not in running and self.placed_at[t] <= asked
                ]
            ended: list[Exited] = []
            for task_id in gone:
                exit_ = exits.get(task_id)
                if exit_ is None:  # ended while its host was down: its report, if any
                    report = self._fetch_report(row, task_id)
                    reason = None if report else f"task host {row.host} no longer runs it"
                    ended.append(Exited(task_id, None, report, reason))
                else:
                    ended.append(Exited(task_id, exit_.exitCode, exit_.report))
            with self.lock:
                for exited in ended:
                    if exited.task_id in self.placed:  # (a task killed meanwhile is not)
                        self._end(exited)
            expected = {t.id for t in placed.get(row.host, [])} | set(on_host)
            strays = running - expected
            if strays:
                self._kill_strays(row, strays)
        if hosts:
            self.local.release()  # an application started before the hosts came, left idle
        self._forget(known)
        self.synced = began

    def _forget(self, known: set[str]) -> None:
        """What is kept of hosts no longer registered (silent FORGOTTEN_S, or a host that
        restarted on another port): dropped, so a host that comes and goes every few minutes
        leaves nothing behind. A client another thread still holds is collected after it."""
        with self.lock:
            for host in set(self.clients) - known:
                del self.clients[host]
            for host in set(self.synced_at) - known:
                del self.synced_at[host]
            for host in set(self.running) - known:
                del self.running[host]

    def _lost(self, host: str, task_ids: list[str]) -> None:
        if not task_ids:
            return
        log.warning("task host %s stopped heartbeating: its tasks %s failed", host, task_ids)
        reason = f"its task host {host} stopped heartbeating"
        with self.lock:
            for task_id in task_ids:
                if task_id in self.placed:
                    self._end(Exited(task_id, None, None, reason))
            self.running.pop(host, None)

    def _end(self, exited: Exited) -> None:
        self.placed.pop(exited.task_id, None)
        self.placed_at.pop(exited.task_id, None)
        self.ended.append(exited)

    def _kill_strays(self, row: WorkerRow, strays: set[str]) -> None:
        """Tasks a host runs that no longer count as running (failed while it was silent, or
        never recorded): killed, so none of them acts on."""
        with self.sessions()() as session:
            query = select(TaskRow.id, TaskRow.status, TaskRow.worker).where(TaskRow.id.in_(strays))
            rows = {task_id: (status, host) for task_id, status, host in session.execute(query)}
        for task_id in sorted(strays):
            if rows.get(task_id) == (TaskStatusCode.RUNNING, row.host):
                continue  # running there in the DB: adopted, not killed
            with self.lock:
                if self.placed.get(task_id) == row.host:
                    continue  # being launched there right now
            log.warning("killing task %s on %s: it no longer counts as running", task_id, row.host)
            try:
                self._client(row).shutdown(task_id)
            except WorkerApiError as exc:
                log.warning("task %s not killed: %s", task_id, exc)

    def kill_all(self) -> None:
        self.local.kill_all()
        with self.lock:
            ids = list(self.placed)
        for task_id in ids:
            self.kill(task_id)
