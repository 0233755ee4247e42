"""Engine creation and migrations to head."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, make_url, text
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import QueuePool

import migrations

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0
WAL_KEPT_BYTES = 8 * 2**20  # what a restarted WAL file is cut back to
MMAP_BYTES = 256 * 2**20  # how much of the DB file reads map (the rest through the cache)
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # A new DB gives pages back: deletes leave them on a free list, which the janitor's
    # `give_back_free_pages` cuts from the file's end, so the file follows its rows down after
    # a peak rather than staying at its largest. Only a DB without tables takes the setting
    # (an older one keeps its own until a VACUUM).
    cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
    cursor.execute("PRAGMA journal_mode=WAL")
    # The WAL restarts from its beginning once a checkpoint has copied it all and no reader
    # still needs it; under readers that overlap for a while it grows past its usual size
    # (1,000 pages), and SQLite keeps the file at its largest unless told to cut it back.
    cursor.execute(f"PRAGMA journal_size_limit={WAL_KEPT_BYTES}")
    cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    # Reads through a mapping of the file rather than copies in each connection's page cache:
    # the pool's connections (up to twenty) each kept up to 2 MiB of pages read, 42 MiB for
    # twenty that had read a soak's 3.4 MB DB, 3.9 MiB so; mapped pages are the system's page
    # cache, shared by every connection and given back under pressure.
    cursor.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def give_back_free_pages(session: Session) -> int:
    """SQLite: the DB's free pages cut from its file (PRAGMA incremental_vacuum, on its own
    after what the session has committed), how many; 0 for a DB made without
    auto_vacuum=INCREMENTAL (before 2026-12-02) and for PostgreSQL, whose autovacuum does its
    own. The pragma frees a page a step and Python's `execute` steps once: `executescript`
    steps it to the end."""
    if session.get_bind().dialect.name != "sqlite":
        return 0
    session.commit()
    before = int(session.execute(text("PRAGMA freelist_count")).scalar_one())
    if before:
        session.connection().connection.dbapi_connection.executescript(  # type: ignore[union-attr]
            "PRAGMA incremental_vacuum"
        )
    return before - int(session.execute(text("PRAGMA freelist_count")).scalar_one())


class _WriterQueue:
    """SQLite lets one transaction write at a time, and a writer that finds the lock taken
    polls for it, sleeping up to 100 ms between tries: under a burst of writers (a rollover
    wave of a thousand supervisors: end offsets, successors, publishes, exits) some poll past
    the busy timeout and fail with "database is locked" while the lock is free most of the
    time. Within the process the writers queue on a lock instead: a transaction takes it
    before its first write and gives it back as it commits or rolls back (SQLAlchemy's events
    come just before the COMMIT, so the next writer may still poll once, briefly). A writer
    that waits longer than the busy timeout goes on without it (SQLite's own locking still
    holds), so nothing can deadlock on it."""

    KEY = "sluicegate_writer"

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def before_write(self, conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if self.KEY in conn.info or not statement.lstrip()[:7].upper().startswith(_WRITES):
            return
        conn.info[self.KEY] = self.lock.acquire(timeout=BUSY_TIMEOUT_S)

    def ended(self, conn: Any) -> None:
        self._release(conn.info)

    def reset(self, dbapi_connection: Any, connection_record: Any, reset_state: Any) -> None:
        self._release(connection_record.info)  # back in the pool, its transaction still open

    def invalidate(self, dbapi_connection: Any, connection_record: Any, exception: Any) -> None:
        self._release(connection_record.info)

    def _release(self, info: dict[str, Any]) -> None:
        if info.pop(self.KEY, False):
            self.lock.release()

    def install(self, engine: Engine) -> None:
        event.listen(engine, "before_cursor_execute", self.before_write)
        event.listen(engine, "commit", self.ended)
        event.listen(engine, "rollback", self.ended)
        event.listen(engine, "reset", self.reset)
        event.listen(engine, "invalidate", self.invalidate)


def _private_file(database: str | None) -> None:
    """The SQLite file readable by its owner only (it holds Kafka secrets and password hashes):
    made so before SQLite makes it, whose journals and WAL copy its mode. An existing one is
    narrowed to that too."""
    if not database or database.startswith("file:"):
        return
    path = Path(database)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CREAT, 0o600)
        try:
            if os.fstat(descriptor).st_mode & 0o077:
                os.fchmod(descriptor, 0o600)
                log.warning("metadata DB %s was readable by others: now 0600", path)
        finally:
            os.close(descriptor)
    except OSError as exc:  # not ours to change, or a directory missing: SQLite says so
        log.warning("metadata DB %s: could not make it private: %s", path, exc)


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        pool: dict[str, Any] = {}
        if ":memory:" not in url and url.rstrip("/") != "sqlite:":
            # A file DB: never make a thread wait for a connection. Request handlers keep their
            # session's connection until the response is validated, which FastAPI does in its
            # thread pool: with a bounded pool, 40 handlers waiting for a connection can hold
            # every thread the holders need to finish (a deadlock until the pool's timeout).
            # SQLite connections are cheap; the writers queue on _WriterQueue. The most recently
            # returned connection is lent first: each keeps a page cache of its own (up to 2 MiB;
            # written pages only with the mapping of _sqlite_pragmas), and lending them in turn
            # would fill all twenty where a few serve.
            pool = {
                "poolclass": QueuePool,
                "pool_size": 20,
                "max_overflow": -1,
                "pool_use_lifo": True,
            }
            _private_file(make_url(url).database)
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S}, **pool
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        _WriterQueue().install(engine)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return create_engine(url, pool_pre_ping=True)


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


MIGRATION_LOCK = 0x5A1CE6A7E  # PostgreSQL advisory lock key: one overlord migrates at a time


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest migration (a no-op when it is there). Overlords that
    start together on a shared PostgreSQL take turns (an advisory lock held by the migrating
    transaction); the second finds the schema there."""
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


SessionFactory = Callable[[], Session]  # a sessionmaker, or what tests give in its place


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
