"""The embedded DuckDB the SQL API runs its queries in: one in-memory database bounded in
memory and threads, a cursor (a connection of its own) per query, at most `max_concurrent`
queries at once (the next is refused with a 429, never queued without bound), each
interrupted at its timeout or by a cancel.

DuckDB reads the tables a query names in place: Arrow datasets over the Parquet files of a
datasource's table, Arrow tables for the system tables, registered on the query's cursor
only. It never opens a file by name itself: `enable_external_access` is off, and the
translation (dialect.py) lets no function through that could."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb

from supervisor.sql.errors import SqlError, busy, cancelled, invalid, timed_out, too_big
from supervisor.sql.time_functions import MACROS
from supervisor.sql.zones import Zone


@dataclass
class Result:
    columns: list[str]
    types: list[str]  # DuckDB's type names
    rows: list[tuple[Any, ...]]


@dataclass
class WithHeld:
    """A datasource read as one table: its published files (None before its first publish)
    and the rows its running tasks hold (supervisor/services/sql_live.py), whose `__time` is
    milliseconds since the epoch. Its columns are the table's, in its order, then `extra`:
    those only the held rows have (null in the published ones)."""

    published: Any
    held: list[Any]  # an Arrow table of those read into memory, a dataset of those on disk
    columns: list[str]
    extra: list[str]

    def sources(self, name: str) -> dict[str, Any]:
        """What the view reads, by the names it gives them."""
        found = {f"{name}_held{i}": source for i, source in enumerate(self.held)}
        if self.published is not None:
            found[f"{name}_published"] = self.published
        return found

    def view(self, name: str) -> str:
        """The query's table as a view of them, made on the query's own connection."""
        held = [
            'timezone(\'UTC\', epoch_ms("__time")) AS "__time"'
            if column == "__time"
            else _quoted(column)
            for column in self.columns + self.extra
        ]
        parts = [
            f"SELECT {', '.join(held)} FROM {_quoted(f'{name}_held{i}')}"
            for i in range(len(self.held))
        ]
        if self.published is not None:
            published = [_quoted(c) for c in self.columns]
            published += [f"NULL AS {_quoted(c)}" for c in self.extra]
            parts.insert(0, f"SELECT {', '.join(published)} FROM {_quoted(name + '_published')}")
        return f"CREATE TEMP VIEW {_quoted(name)} AS {' UNION ALL '.join(parts)}"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class _Running:
    cursor: Any
    owner: str = ""  # who asked (the identity's name): who else may cancel it is the API's call
    cancelled: bool = False
    timed_out: bool = False


class SqlEngine:
    def __init__(self, threads: int, memory_mb: int, max_concurrent: int) -> None:
        self.database = duckdb.connect(
            ":memory:",
            config={
                "threads": threads,
                "memory_limit": f"{memory_mb}MB",
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
            },
        )
        for macro in MACROS:
            self.database.execute(macro)
        self.max_concurrent = max_concurrent
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()

    def run(
        self,
        query_id: str,
        sql: str,
        sources: dict[str, Any],
        session: Zone,
        timeout_ms: int,
        max_rows: int,
        owner: str = "",
    ) -> Result:
        """The query's rows (at most `max_rows`: more is an error, not a cut), its tables
        `sources` by the names the translation gave them. The caller holds a slot (`admit`)."""
        running = _Running(None, owner)
        with self._lock:
            if query_id in self._running:  # (whose it is, the asker need not learn)
                raise invalid(f"sqlQueryId [{query_id}] is in use: give another")
            self._running[query_id] = running
        try:
            running.cursor = self.database.cursor()
            if running.cancelled:  # before its cursor was there to interrupt
                raise cancelled(query_id)
            timer = threading.Timer(timeout_ms / 1000, self._expire, (running,))
            timer.daemon = True
            timer.start()
            try:
                return self._execute(running, sql, sources, session, max_rows)
            except duckdb.InterruptException:
                if running.cancelled:
                    raise cancelled(query_id) from None
                raise timed_out(timeout_ms) from None
            finally:
                timer.cancel()
        finally:
            with self._lock:
                self._running.pop(query_id, None)
            if running.cursor is not None:
                running.cursor.close()

    @contextmanager
    def admit(self) -> Iterator[None]:
        """One of the `max_concurrent` slots, held from the parse to the answer (a query's
        parse and translation cost CPU too); none free is a 429, never a queue."""
        if not self._slots.acquire(blocking=False):
            raise busy(self.max_concurrent)
        try:
            yield
        finally:
            self._slots.release()

    def _execute(
        self, running: _Running, sql: str, sources: dict[str, Any], session: Zone, max_rows: int
    ) -> Result:
        cursor = running.cursor
        assert cursor is not None
        try:
            # a Zone's name is checked; one Python knows and DuckDB does not is the asker's 400
            cursor.execute(f"SET TimeZone = '{session.name}'")
            for name, source in sources.items():
                if isinstance(source, WithHeld):
                    for part, read in source.sources(name).items():
                        cursor.register(part, read)
                    cursor.execute(source.view(name))
                else:
                    cursor.register(name, source)
            cursor.execute(sql)
        except duckdb.InterruptException:
            raise
        except duckdb.OutOfMemoryException as exc:
            raise too_big(f"the query needs more memory than it may use: {_line(exc)}") from None
        except duckdb.Error as exc:
            raise _refused(exc) from None
        columns = [column[0] for column in cursor.description or []]
        types = [str(column[1]) for column in cursor.description or []]
        try:
            rows = cursor.fetchmany(max_rows + 1)
        except duckdb.InterruptException:
            raise
        except duckdb.Error as exc:
            raise _refused(exc) from None
        if len(rows) > max_rows:
            raise too_big(f"the result has more than {max_rows} rows: add a LIMIT, or aggregate")
        return Result(columns, types, rows)

    def _expire(self, running: _Running) -> None:
        running.timed_out = True
        self._interrupt(running)

    def _interrupt(self, running: _Running) -> None:
        """Interrupt the query until it has ended: DuckDB's interrupt stops only the statement
        running at that moment, so one that lands between two (the zone's SET, a register, the
        query) would be lost, and the query run on to its timeout."""

        def again() -> None:
            while True:
                with self._lock:
                    if all(other is not running for other in self._running.values()):
                        return
                if running.cursor is not None:
                    running.cursor.interrupt()
                time.sleep(0.05)

        threading.Thread(target=again, name="sql-interrupt", daemon=True).start()

    def owner(self, query_id: str) -> str | None:
        """Who runs the query (None: no query runs with that id)."""
        with self._lock:
            running = self._running.get(query_id)
        return None if running is None else running.owner

    def cancel(self, query_id: str) -> bool:
        """Interrupt a running query; False if none runs with that id."""
        with self._lock:
            running = self._running.get(query_id)
        if running is None:
            return False
        running.cancelled = True
        self._interrupt(running)
        return True

    def running(self) -> list[str]:
        with self._lock:
            return list(self._running)

    def close(self) -> None:
        with self._lock:
            for running in self._running.values():
                running.cancelled = True
                if running.cursor is not None:
                    running.cursor.interrupt()
        self.database.close()


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


def _refused(exc: duckdb.Error) -> SqlError:
    """DuckDB's error for a query it could not plan or run, as Druid's 400: the query is the
    asker's (a column not found, a type mismatch, a value out of range). A file a compaction or
    kill removed while the query read it is a 503 to try again."""
    if isinstance(exc, duckdb.IOException):
        return SqlError(
            503, "unavailable", "RUNTIME_FAILURE", f"a table changed under the query: {_line(exc)}"
        )
    message = _line(exc).replace('"sg_t', '"table ')
    return invalid(message)
