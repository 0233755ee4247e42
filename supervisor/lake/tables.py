"""Each datasource an Iceberg table (format v2): a publish appends its segment files as one
snapshot, in the publish's own metadata-DB transaction (supervisor/lake/catalog.py).

The table lives at `<deep storage>/<datasource>` (its metadata under `metadata/`), named
`druid.<datasource>` in the catalog. It is made by the first publish: its schema from the
segment files (`__time` timestamptz, the dimensions and metrics as the task wrote them), its
partitioning the Iceberg transform of the segment granularity (hour, day, month or year of
`__time`; a week's segments have none that holds them: unpartitioned). A later publish whose
files hold a column the table lacks (schema discovery) adds it; one whose segments a coarser
or finer granularity cut gets the partitioning evolved. Segment files carry no Iceberg field
ids: the table's name mapping (`schema.name-mapping.default`) maps their columns by name, as
for files added to a table from elsewhere."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import (
    _check_pyarrow_schema_compatible,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import assign_fresh_schema_ids
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import Transform
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from supervisor.lake.append import append as lean_append
from supervisor.lake.catalog import NAMESPACE, MetadataCatalog, Pending, catalog_properties
from supervisor.lake.partitioning import (
    partition_by,
    partitioned_by,
    spec_of,
    transform_for,
)
from supervisor.lru import Lru
from tasks.storage import Storage

log = logging.getLogger(__name__)

ATTEMPTS = 20  # commits of another group of the same table in between: each is one retry
TABLE_PROPERTIES = {
    "format-version": "2",
    # the metadata files of commits long past go (Iceberg's own default keeps 100)
    TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
    TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: "100",
    # pyiceberg would retry a lost swap itself after a sleep, inside the publish's transaction
    # and its locks; Lake retries at once (the winner has committed by then)
    TableProperties.COMMIT_NUM_RETRIES: "0",
    # a commit merges the small manifests once there are 100 (supervisor/lake/append.py), as
    # Iceberg's Java library does by default; pyiceberg's own appends do too with this set
    TableProperties.MANIFEST_MERGE_ENABLED: "true",
}


# what each snapshot's summary says of the range it holds (as Flink's sink records its
# checkpoint): whose, under which leader epoch, and the offsets (JSON partition -> offset)
SUMMARY_SUPERVISOR = "sluicegate.supervisor"
SUMMARY_TASK = "sluicegate.task"
SUMMARY_EPOCH = "sluicegate.leader-epoch"
SUMMARY_STREAM = "sluicegate.stream"
SUMMARY_START = "sluicegate.start-offsets"
SUMMARY_END = "sluicegate.end-offsets"
SUMMARY_COMMITTED = "sluicegate.committed-offsets"  # the supervisor's, this snapshot included
# a snapshot that is not a publish: "reset", "resetOffsets" (no files; its committed offsets),
# "adopt" (a table made for the segments of a release before Iceberg)
SUMMARY_OPERATION = "sluicegate.operation"
ADOPTION = "adopt"
# in the table's first snapshot: how many segments published before Iceberg it took in
SUMMARY_ADOPTED = "sluicegate.adopted-segments"


class LakeConflict(RuntimeError):
    """The table moved under every attempt of a publish: the publish is retried whole."""


@dataclass(frozen=True)
class Published:
    """What a publish appends: its segment files (with their size) and the snapshot's summary."""

    datasource: str
    files: list[tuple[str, int]]
    intervals: list[tuple[datetime, datetime]]  # each file's segment interval
    summary: dict[str, str]
    # what the table takes in only should this commit make it: the datasource's segments a
    # release before Iceberg published (a commit that finds it made meanwhile leaves them)
    adopted: list[tuple[str, int]] = field(default_factory=list)
    adopted_intervals: list[tuple[datetime, datetime]] = field(default_factory=list)

    def making(self) -> Published:
        """This commit as the table's first: the adopted files too, and how many."""
        return replace(
            self,
            files=self.adopted + self.files,
            intervals=self.adopted_intervals + self.intervals,
            summary={**self.summary, SUMMARY_ADOPTED: str(len(self.adopted))},
            adopted=[],
            adopted_intervals=[],
        )


def published(
    datasource: str,
    files: list[tuple[str, int, str, str]],
    summary: dict[str, str],
    adopted: list[tuple[str, int, str, str]] = (),  # type: ignore[assignment]
) -> Published:
    """What a commit appends: (path, size, interval start, interval end) of each file, and of
    each file it adopts should it make the table."""

    def intervals(of: list[tuple[str, int, str, str]]) -> list[tuple[datetime, datetime]]:
        return [(datetime.fromisoformat(a), datetime.fromisoformat(b)) for _, _, a, b in of]

    return Published(
        datasource=datasource,
        files=[(path, size) for path, size, _, _ in files],
        intervals=intervals(files),
        summary=summary,
        adopted=[(path, size) for path, size, _, _ in adopted],
        adopted_intervals=intervals(list(adopted)),
    )


class Lake:
    """The datasources' tables, committed through `catalog` in a publish's session."""

    def __init__(self, catalog: MetadataCatalog, location: str) -> None:
        self.catalog = catalog
        self.location = location.rstrip("/")  # deep storage's URI

    def identifier(self, datasource: str) -> tuple[str, str]:
        return (NAMESPACE, datasource)

    def exists(self, session: Session, datasource: str) -> bool:
        return self.catalog.location_of(session, self.identifier(datasource)) is not None

    def append(self, session: Session, published: Published) -> None:
        """Commit the files as one snapshot in `session`'s transaction (not committed here).
        Another publish to the table in between is a retry on its metadata."""
        footers = self.footers(published)
        with self.catalog.bound(session):
            for _ in range(ATTEMPTS):
                try:
                    commit = self._transaction(session, published, footers)
                    if commit is not None:
                        commit.commit_transaction()
                    return
                except CommitFailedException as exc:
                    log.info(
                        "commit to %s: %s; retried on its new metadata", published.datasource, exc
                    )
        raise LakeConflict(f"table {NAMESPACE}.{published.datasource} moved {ATTEMPTS} times")

    def stage(self, session: Session, published: Published) -> Pending | None:
        """The snapshot's files and metadata written, its swap not made: what a publish does
        before its transaction writes anything (on SQLite, before it holds the one writer
        lock), to `commit` once its offsets are swapped, or `discard` if they are not. None
        when the table moved meanwhile (the commit then builds it again)."""
        footers = self.footers(published)
        with self.catalog.bound(session), self.catalog.deferring() as pending:
            try:
                commit = self._transaction(session, published, footers)
                if commit is not None:
                    commit.commit_transaction()
            except CommitFailedException:
                return None
        return pending[0] if pending else None

    def commit(self, session: Session, published: Published, staged: Pending | None) -> None:
        """Swap `staged` in; where the table moved since it was staged (or it was not),
        append the files anew on what the table holds now."""
        if staged is not None:
            try:
                self.catalog.swap(session, staged)
                return
            except CommitFailedException as exc:  # (staged is deleted)
                log.info("commit to %s: %s; staged again", published.datasource, exc)
        self.append(session, published)

    def discard(self, staged: Pending | None) -> None:
        if staged is not None:
            self.catalog.discard(staged)

    def footers(self, published: Published) -> dict[str, tuple[str, int, Any]]:
        """Each file's footer (the adopted ones' too), by path."""
        io = self.catalog._load_file_io(location=self.location)
        footers = {}
        for path, size in published.adopted + published.files:
            with io.new_input(path).open() as stream:
                footers[path] = (path, size, pq.read_metadata(stream))
        return footers

    def _transaction(
        self, session: Session, published: Published, read: dict[str, tuple[str, int, Any]]
    ) -> _Commit | None:
        """The table's next version: the files added as one snapshot, with its summary, on
        the table as it is now (made, with the adopted files, if it is not yet); None when
        there is nothing to add (an adoption that found the table made)."""
        ident = self.identifier(published.datasource)
        location = self.catalog.location_of(session, ident)
        if location is None:
            published = published.making()
        elif not published.files and published.summary.get(SUMMARY_OPERATION) == ADOPTION:
            return None
        footers = [read[path] for path, _ in published.files]
        # the segment granularity's transform (its coarsest, should one publish hold two)
        transforms = [transform_for(start, end) for start, end in published.intervals]
        wanted = transforms[0] if len({str(t) for t in transforms}) == 1 else None
        if location is None:
            if not footers:
                raise ValueError("a table is made by a publish with files")
            first = footers[0][2].schema.to_arrow_schema()
            schema = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(first))
            txn: Transaction = self.catalog.create_table_transaction(
                ident,
                schema,
                location=f"{self.location}/{published.datasource}",
                partition_spec=spec_of(schema, wanted),
                properties=TABLE_PROPERTIES,
            )
        else:
            table = self.catalog.table_at(ident, location)
            if _fits(table.metadata, footers, wanted):
                return _Lean(self.catalog, table, footers, published.summary)
            txn = table.transaction()
        _evolve(txn, footers, wanted)
        with txn.update_snapshot(snapshot_properties=published.summary).fast_append() as add:
            for path, size, footer in footers:
                add.append_data_file(data_file(txn.table_metadata, path, size, footer))
        return txn


class _Commit(Protocol):
    def commit_transaction(self) -> object: ...


@dataclass
class _Lean:
    """The common publish: files the table's schema, partitioning and name mapping already
    hold, appended with one metadata update (supervisor/lake/append.py)."""

    catalog: MetadataCatalog
    table: Table
    footers: list[tuple[str, int, Any]]
    summary: dict[str, str]

    def commit_transaction(self) -> object:
        metadata = self.table.metadata
        files = [data_file(metadata, path, size, footer) for path, size, footer in self.footers]
        updates, requirements, written = lean_append(self.table.io, metadata, files, self.summary)
        try:
            return self.catalog.commit_table(self.table, requirements, updates)
        except CommitFailedException:
            for path in written:  # (a lost swap deleted them already; a refused one did not)
                with contextlib.suppress(OSError, ValueError):
                    self.table.io.delete(path)
            raise


def _fits(metadata: TableMetadata, footers: list[tuple[str, int, Any]], wanted: Any) -> bool:
    """Whether the table takes these files as it is: every column known by name, its name
    mapping set, and (files given) its partitioning the granularity's."""
    if metadata.name_mapping() is None or not retries_off(metadata):
        return False
    known = {field.name for field in metadata.schema().fields}
    if any(not set(footer.schema.to_arrow_schema().names) <= known for _, _, footer in footers):
        return False
    return not footers or partitioned_by(metadata.spec(), wanted)


def retries_off(metadata: TableMetadata) -> bool:
    """Whether pyiceberg's own retries of the table's commits are off (TABLE_PROPERTIES)."""
    return metadata.properties.get(TableProperties.COMMIT_NUM_RETRIES) == "0"


def _evolve(
    txn: Transaction, footers: list[tuple[str, int, Any]], wanted: Transform[Any, Any] | None
) -> None:
    """Columns the files hold and the table lacks, added (by name); the name mapping set (the
    files have no field ids) and kept up to date; the partitioning made the granularity's (a
    publish with no files leaves it as it is)."""
    metadata = txn.table_metadata
    known = {field.name for field in metadata.schema().fields}
    for _path, _size, footer in footers:
        arrow = footer.schema.to_arrow_schema()
        if not set(arrow.names) <= known:
            with txn.update_schema() as update:
                update.union_by_name(arrow)
            known |= set(arrow.names)
    if txn.table_metadata.name_mapping() is None:
        mapping = txn.table_metadata.schema().name_mapping.model_dump_json()
        txn.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
    if not retries_off(txn.table_metadata):  # (a table made before they were off)
        txn.set_properties({TableProperties.COMMIT_NUM_RETRIES: "0"})
    if footers:
        partition_by(txn, wanted)


# what a footer's reading needs of a table's schema, by (table, schema, the file's own
# columns): the check that the file's columns fit, the stats plan and the column ids by path.
# The file's schema metadata is no part of the key: each segment file's names its segment
# (and Arrow's own copy of the schema), so keyed with it no file found the entry another had
# made, and the cache held 10,000 plans of a few schemas (the soak's overlord grew by them)
_PLANS: Lru[tuple[str, int, str], tuple[Any, Any]] = Lru(1_000, name="footer plans")


def data_file(metadata: TableMetadata, path: str, size: int, footer: Any) -> DataFile:
    """A segment file as a data file of the table: its stats and partition from its footer
    (pyiceberg's own reading of a Parquet footer, as its add_files does)."""
    schema = metadata.schema()
    arrow = footer.schema.to_arrow_schema()
    columns = arrow.remove_metadata().to_string(show_schema_metadata=False)
    key = (str(metadata.table_uuid), metadata.current_schema_id, columns)
    plan = _PLANS.get(key)
    if plan is None:
        _check_pyarrow_schema_compatible(schema, arrow, format_version=metadata.format_version)
        plan = (
            compute_statistics_plan(schema, metadata.properties),
            parquet_path_to_id_mapping(schema),
        )
        _PLANS.put(key, plan)
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer, stats_columns=plan[0], parquet_column_mapping=plan[1]
    )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=statistics.partition(metadata.spec(), schema),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )


CATALOG = "sluicegate"  # the catalog's name in its tables (a reader names its catalog so)


def open_lake(engine: Engine, storage: Storage) -> Lake:
    """The datasources' tables in deep storage, catalogued in the metadata DB `engine` opens."""
    return Lake(MetadataCatalog(CATALOG, engine, **catalog_properties(storage)), storage.location)
