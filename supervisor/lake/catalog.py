"""Iceberg's SQL catalog on the metadata DB, whose commits join the caller's transaction.

The catalog's tables are Iceberg's JDBC catalog tables (`iceberg_tables`,
`iceberg_namespace_properties`, schema V1; migration 0011), so Spark's `JdbcCatalog`,
pyiceberg's `SqlCatalog` and Trino's JDBC catalog read them. pyiceberg builds every new
version of a table's metadata (manifests, manifest list, metadata file: nothing here writes
Iceberg's formats); this class only decides where the swap of the table's metadata location
happens: in the session `bound` gives it, the publish's own transaction, by compare-and-swap
on the location it started from, as Iceberg's JDBC catalog commits. A swap that finds the
location moved raises CommitFailedException; its staged metadata file is deleted."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, cast

from pyiceberg.catalog import Catalog, MetastoreCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    TableRequirement,
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
)
from pyiceberg.utils.datetime import datetime_to_millis
from sqlalchemy import Engine, bindparam, event, insert, select, update
from sqlalchemy import Table as SqlTable
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from supervisor.db.models import IcebergTableRow as IcebergTables
from supervisor.lake import append
from supervisor.lru import Lru

log = logging.getLogger(__name__)


class _DiscardedAlready(logging.Filter):
    """pyiceberg's cleanup after a lost commit deletes the manifests it staged, and logs a
    warning with a traceback for each it cannot find; `Catalog.discard` deleted them first
    (34 such warnings in four minutes of a soak). Those go; any other failure is logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        gone = record.exc_info is not None and isinstance(record.exc_info[1], FileNotFoundError)
        return not (gone and record.getMessage().startswith("Failed to delete uncommitted"))


logging.getLogger("pyiceberg.table.update.snapshot").addFilter(_DiscardedAlready())

TABLES_KEPT = 10_000  # tables whose metadata the catalog keeps in memory
NAMESPACE = "druid"  # Druid SQL's schema of datasources; the tables' Iceberg namespace
TABLE = "TABLE"  # iceberg_type of a table in the V1 schema (views have VIEW)


# a swap's statements, built once (a publish runs them holding SQLite's one writer lock)
_TABLE = cast(SqlTable, IcebergTables.__table__)
_CREATE = insert(_TABLE).values(
    catalog_name=bindparam("catalog"),
    table_namespace=bindparam("namespace"),
    table_name=bindparam("name"),
    metadata_location=bindparam("location"),
    previous_metadata_location=None,
    iceberg_type=TABLE,
)
_SWAP = (
    update(_TABLE)
    .where(
        _TABLE.c.catalog_name == bindparam("catalog"),
        _TABLE.c.table_namespace == bindparam("namespace"),
        _TABLE.c.table_name == bindparam("name"),
        _TABLE.c.metadata_location == bindparam("started"),
    )
    .values(
        metadata_location=bindparam("location"), previous_metadata_location=bindparam("started")
    )
)


# what a transaction's commit is to be followed by: deletions of files the committed metadata
# no longer lists (never before the commit: a rolled-back swap leaves the table as it was)
_AFTER_COMMIT = "sluicegate_lake_after_commit"


def after_commit(session: Session, action: Callable[[], None]) -> None:
    """Run `action` once `session`'s transaction commits (never, if it rolls back): what
    deletes files only a committed change has let go of."""
    session.info.setdefault(_AFTER_COMMIT, []).append(action)


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    for action in session.info.pop(_AFTER_COMMIT, ()):
        action()


@event.listens_for(Session, "after_rollback")
def _after_rollback(session: Session) -> None:
    session.info.pop(_AFTER_COMMIT, None)


@dataclass(frozen=True)
class Pending:
    """A commit whose metadata is written and whose swap is still to come."""

    identifier: tuple[str, str]
    started: str | None  # the metadata location it was staged on (None: a new table)
    metadata: TableMetadata
    location: str  # its own metadata file
    base: Table | None


def _drops_from_log(base: TableMetadata, metadata: TableMetadata) -> bool:
    """Whether the new metadata's log lost an entry of the old's (none until it holds the
    kept number of versions)."""
    kept = {entry.metadata_file for entry in metadata.metadata_log}
    return not all(entry.metadata_file in kept for entry in base.metadata_log)


class MetadataCatalog(SqlCatalog):
    """pyiceberg's SqlCatalog on the overlord's engine (no second pool), with commits in the
    bound session when there is one (a publish's), else in a session of their own."""

    def __init__(self, name: str, engine: Engine, **properties: str) -> None:
        # SqlCatalog's own __init__ makes an engine and probes the tables; the migration made
        # them (schema V1), and the overlord's engine is the one to use
        MetastoreCatalog.__init__(self, name, uri=engine.url.render_as_string(), **properties)
        self.engine = engine
        self._schema_version = "v1"
        self._bound: ContextVar[Session | None] = ContextVar(f"lake-{id(self)}", default=None)
        self._deferred: ContextVar[list[Pending] | None] = ContextVar(
            f"lake-deferred-{id(self)}", default=None
        )
        # each table's metadata as of its latest location seen here (a file never changes)
        self._metadata: Lru[tuple[str, str], tuple[str, TableMetadata]] = Lru(
            TABLES_KEPT, name="table metadata"
        )

    @contextlib.contextmanager
    def bound(self, session: Session) -> Iterator[None]:
        """Within: every read of a table's location and every commit runs in `session`."""
        token = self._bound.set(session)
        try:
            yield
        finally:
            self._bound.reset(token)

    def location_of(self, session: Session, identifier: tuple[str, str]) -> str | None:
        namespace, name = identifier
        found = session.execute(
            select(IcebergTables.metadata_location).where(
                IcebergTables.catalog_name == self.name,
                IcebergTables.table_namespace == namespace,
                IcebergTables.table_name == name,
            )
        ).scalar_one_or_none()
        return str(found) if found is not None else None

    def table_at(self, identifier: tuple[str, str], location: str) -> Table:
        """The table whose metadata file is `location` (read once per location)."""
        io = self._load_file_io(location=location)
        known = self._metadata.get(identifier)
        if known is not None and known[0] == location:
            metadata = known[1]
        else:
            metadata = FromInputFile.table_metadata(io.new_input(location))
            self._metadata.put(identifier, (location, metadata))
        return Table(identifier, metadata, location, io, self)

    def load_table(self, identifier: str | tuple[str, ...]) -> Table:
        session = self._bound.get()
        if session is None:
            return super().load_table(identifier)
        ident = (
            Catalog.namespace_to_string(Catalog.namespace_from(identifier)),
            Catalog.table_name_from(identifier),
        )
        location = self.location_of(session, ident)
        if location is None:
            raise NoSuchTableError(f"Table does not exist: {ident[0]}.{ident[1]}")
        return self.table_at(ident, location)

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        session = self._bound.get()
        if session is None:
            return super().commit_table(table, requirements, updates)
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(table.name()))
        name = Catalog.table_name_from(table.name())
        # a table read here commits on the location it was read at (the swap finds whether
        # it moved since); one being made, on none
        making = isinstance(table, StagedTable)
        started = (
            self.location_of(session, (namespace, name)) if making else table.metadata_location
        )
        current = self.table_at((namespace, name), started) if started else None
        # a requirement that no longer holds (another commit moved the table) raises
        # CommitFailedException here, before anything is written
        staged = self._update_and_stage_table(current, table.name(), requirements, updates)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        pending = Pending(
            (namespace, name), started, staged.metadata, staged.metadata_location, current
        )
        deferred = self._deferred.get()
        if deferred is not None:  # the caller swaps it later (swap), or discards it
            deferred.append(pending)
        else:
            self.swap(session, pending)
        return CommitTableResponse(
            metadata=staged.metadata, metadata_location=staged.metadata_location
        )

    def _update_and_stage_table(
        self,
        current_table: Table | None,
        table_identifier: tuple[str, ...],
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> StagedTable:
        """pyiceberg's staging of a commit, without the deep copy of the whole metadata that
        its update_table_metadata makes last (a defensive copy, its cost growing with every
        snapshot the table keeps: most of a publish's CPU after a hundred of them). The new
        metadata shares the unchanged parts of the old, which nothing here changes."""
        if current_table is None:
            return super()._update_and_stage_table(None, table_identifier, requirements, updates)
        base = current_table.metadata
        for requirement in requirements:
            requirement.validate(base)
        metadata = _updated(base, updates, current_table.metadata_location)
        version = self._parse_metadata_version(current_table.metadata_location) + 1
        provider = load_location_provider(metadata.location, metadata.properties)
        location = provider.new_table_metadata_file_location(version)
        return StagedTable(
            identifier=table_identifier,
            metadata=metadata,
            metadata_location=location,
            io=self._load_file_io(properties=metadata.properties, location=location),
            catalog=self,
        )

    @contextlib.contextmanager
    def deferring(self) -> Iterator[list[Pending]]:
        """Within: a commit writes its metadata but does not swap the table's location; the
        list gets what is pending, for `swap` (or `discard`) later."""
        pending: list[Pending] = []
        token = self._deferred.set(pending)
        try:
            yield pending
        finally:
            self._deferred.reset(token)

    def swap(self, session: Session, pending: Pending) -> None:
        """Make `pending` the table's current metadata in `session`'s transaction: a
        compare-and-swap on the location it was staged on (an insert for a new table). One
        that finds the location moved deletes what it staged and raises
        CommitFailedException."""
        namespace, name = pending.identifier
        key = {"catalog": self.name, "namespace": namespace, "name": name}
        try:
            if pending.started is None:
                with session.begin_nested():  # a race to create it: the loser retries
                    # (the connection taken within, so that its savepoint is made first)
                    session.connection().execute(_CREATE, {**key, "location": pending.location})
            else:
                swapped = session.connection().execute(
                    _SWAP, {**key, "started": pending.started, "location": pending.location}
                )
                if swapped.rowcount < 1:
                    raise CommitFailedException(f"{namespace}.{name} was committed meanwhile")
        except (CommitFailedException, IntegrityError):
            self.discard(pending)
            raise CommitFailedException(f"{namespace}.{name} was committed meanwhile") from None
        self._metadata.put(pending.identifier, (pending.location, pending.metadata))
        base = pending.base
        if base is not None and _drops_from_log(base.metadata, pending.metadata):
            deletion = partial(
                self._delete_fallen_off, base.metadata, pending.metadata, pending.location
            )
            after_commit(session, deletion)

    def _delete_fallen_off(self, base: TableMetadata, metadata: TableMetadata, at: str) -> None:
        """The metadata files past the table's kept log, once the commit that dropped them
        from it is made (outside SQLite's writer lock, too)."""
        try:
            Catalog._delete_old_metadata(self._load_file_io(location=at), base, metadata)
        except Exception as exc:  # (an orphan no reader sees; the commit stands)
            log.warning("old metadata of %s not deleted: %s", at, exc)

    @staticmethod
    def _delete_old_metadata(io: Any, base: TableMetadata, metadata: TableMetadata) -> None:
        """(pyiceberg calls this after each commit; here `swap` schedules it for after the
        transaction that made the swap commits: a deferred commit may never be)"""

    def discard(self, pending: Pending) -> None:
        """Delete what a commit that did not happen wrote: its metadata file, and its new
        snapshot's manifest list and the manifests that snapshot added (best effort: a file
        left behind is an orphan no reader sees)."""
        io = self._load_file_io(location=pending.location)
        doomed = [pending.location]
        base = pending.base
        known = {s.snapshot_id for s in base.metadata.snapshots} if base is not None else set()
        for snapshot in pending.metadata.snapshots:
            if snapshot.snapshot_id in known:
                continue
            doomed.append(snapshot.manifest_list)
            for manifest in snapshot.manifests(io):
                if manifest.added_snapshot_id == snapshot.snapshot_id:
                    doomed.append(manifest.manifest_path)
        for path in doomed:
            try:
                io.delete(path)
            except (OSError, ValueError) as exc:
                log.warning("could not delete %s of a commit that did not happen: %s", path, exc)
        # a publish remembers the manifest list it wrote: not asked for again
        append.forget(
            [s.manifest_list for s in pending.metadata.snapshots if s.snapshot_id not in known]
        )


def _updated(base: TableMetadata, updates: tuple[TableUpdate, ...], location: str) -> TableMetadata:
    """`base` with `updates` applied, as pyiceberg's update_table_metadata makes it (each
    update a shallow copy, the metadata log extended) but for its final deep copy."""
    context = _TableMetadataUpdateContext()
    metadata = base
    for change in updates:
        metadata = _apply_table_update(change, metadata, context)
    if context.has_changes():
        metadata = _update_table_metadata_log(metadata, location, base.last_updated_ms)
        if metadata.last_updated_ms == base.last_updated_ms:
            now = datetime_to_millis(datetime.now().astimezone())
            metadata = metadata.model_copy(update={"last_updated_ms": now})
    metadata.spec().check_compatible(metadata.schema())
    metadata.sort_order().check_compatible(metadata.schema())
    return metadata


def catalog_properties(storage: Any) -> dict[str, str]:
    """pyiceberg's FileIO settings for deep storage (tasks/storage.py Storage): S3's endpoint,
    region and credentials when it is a bucket."""
    if not storage.is_s3:
        return {}
    found = {
        "s3.endpoint": storage.endpoint,
        "s3.region": storage.region,
        "s3.access-key-id": storage.access_key,
        "s3.secret-access-key": storage.secret_key,
        "s3.session-token": storage.session_token,
    }
    return {key: value for key, value in found.items() if value}
