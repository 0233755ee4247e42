"""Snapshots that take files out of a datasource's table, committed in the caller's
metadata-DB transaction as a publish is: segments marked unused (by a user, or by a drop
rule; their files stay in deep storage until a kill), and a compaction's replacement of an
interval's small files by large ones."""

from __future__ import annotations

import logging
from typing import Any

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.manifest import DataFile, ManifestContent
from pyiceberg.table import Table, TableProperties
from pyiceberg.transforms import Transform
from sqlalchemy.orm import Session

from supervisor.lake.append import manifests_of
from supervisor.lake.partitioning import partition_by, time_transform, transform_for
from supervisor.lake.tables import (
    ATTEMPTS,
    Lake,
    LakeConflict,
    Published,
    data_file,
    retries_off,
)

log = logging.getLogger(__name__)


def remove(
    lake: Lake, session: Session, datasource: str, paths: set[str], summary: dict[str, str]
) -> int:
    """Commit a snapshot of the datasource's table without these data files (an Iceberg
    overwrite that adds none), in `session`'s transaction (not committed here); how many it
    took out (0: the table held none of them, and no snapshot is made). Another commit to the
    table in between is a retry on its metadata."""
    ident = lake.identifier(datasource)
    with lake.catalog.bound(session):
        for _ in range(ATTEMPTS):
            location = lake.catalog.location_of(session, ident)
            if location is None:
                return 0
            table = lake.catalog.table_at(ident, location)
            doomed = _held(table, paths)
            if not doomed:
                return 0
            txn = table.transaction()
            with txn.update_snapshot(snapshot_properties=summary).overwrite() as overwrite:
                for doomed_file in doomed:
                    overwrite.delete_data_file(doomed_file)
            try:
                txn.commit_transaction()
                return len(doomed)
            except CommitFailedException as exc:
                log.info("removal from %s: %s; retried on its new metadata", datasource, exc)
    raise LakeConflict(f"table {ident[0]}.{datasource} moved {ATTEMPTS} times")


def _held(table: Table, paths: set[str]) -> list[DataFile]:
    """The data files of the table's current snapshot whose path is one of `paths`."""
    snapshot = table.current_snapshot()
    io = table.io
    found: list[DataFile] = []
    for manifest in manifests_of(io, snapshot):
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            if entry.data_file.file_path in paths:
                found.append(entry.data_file)
    return found


class Replaced(RuntimeError):
    """A compaction's input is no longer what the table holds (marked unused, killed, or
    compacted meanwhile): its commit gives up."""


def replace(
    lake: Lake,
    session: Session,
    published: Published,
    inputs: set[str],
    footers: dict[str, tuple[str, int, Any]] | None = None,
) -> None:
    """Commit one snapshot that removes `inputs` and adds the published files, in `session`'s
    transaction (not committed here). Validated as Iceberg validates a rewrite: every input
    must still be live on the table as it is at the commit (Replaced otherwise); files other
    commits added meanwhile (streaming appends to the same interval) are kept as they are. A
    commit that raced another is retried on its metadata. `footers`: the published files'
    (Lake.footers), when the caller read them already.

    Files of an interval the table's partitioning does not hold (a month's compacted days,
    or such a segment marked used again) are added under a spec of their interval's transform,
    made the default for as long as their snapshot is made (pyiceberg writes a snapshot's
    added files under the default spec); each such group of files is a snapshot of its own in
    the same commit, and the table's own partitioning is the default again at its end."""
    footers = footers if footers is not None else lake.footers(published)
    ident = lake.identifier(published.datasource)
    with lake.catalog.bound(session):
        for _ in range(ATTEMPTS):
            location = lake.catalog.location_of(session, ident)
            if location is None:
                raise Replaced(f"table {ident[0]}.{published.datasource} is gone")
            table = lake.catalog.table_at(ident, location)
            held = _held(table, inputs)
            if len(held) != len(inputs):
                gone = len(inputs) - len(held)
                raise Replaced(f"{gone} of the {len(inputs)} files it replaces left the table")
            try:
                table = _without_retries(lake, session, ident, table)
                txn = table.transaction()
                own = time_transform(txn.table_metadata.spec())
                for n, (transform, paths) in enumerate(_by_transform(published, own)):
                    partition_by(txn, transform)
                    metadata = txn.table_metadata
                    producer = txn.update_snapshot(snapshot_properties=published.summary)
                    write = producer.overwrite() if n == 0 else producer.fast_append()
                    with write:
                        for held_file in held if n == 0 else []:
                            write.delete_data_file(held_file)
                        for path in paths:
                            write.append_data_file(data_file(metadata, *footers[path]))
                partition_by(txn, own)
                txn.commit_transaction()
                return
            except CommitFailedException as exc:
                log.info("replace in %s: %s; retried on its new metadata", ident[1], exc)
            except ValidationException as exc:
                # pyiceberg's own check that every file deleted is live in the parent snapshot
                # (seen twice in the soak's hour of 2026-12-03 for a file `_held` had found):
                # nothing is written to the table, and the compaction gives up as for a file
                # that left, where it was an unexpected error (a 500) before
                log.warning("replace in %s refused by pyiceberg: %s", ident[1], exc)
                raise Replaced(f"the table refused the replace: {exc}") from None
    raise LakeConflict(f"table {ident[0]}.{published.datasource} moved {ATTEMPTS} times")


def _by_transform(
    published: Published, own: Transform[Any, Any] | None
) -> list[tuple[Transform[Any, Any] | None, list[str]]]:
    """The published files by the transform of `__time` their interval's partition is, those
    of the table's own (`own`) first (a compaction's files, all of one interval, are one
    group: its deletes and adds one snapshot); one group of none when there are no files."""
    groups: dict[str, tuple[Transform[Any, Any] | None, list[str]]] = {str(own): (own, [])}
    for (path, _), interval in zip(published.files, published.intervals, strict=True):
        transform = transform_for(*interval)
        groups.setdefault(str(transform), (transform, []))[1].append(path)
    return [group for group in groups.values() if group[1]] or [(own, [])]


def _without_retries(lake: Lake, session: Session, ident: tuple[str, str], table: Table) -> Table:
    """The table, its pyiceberg retries turned off first if they are not (a table made before
    TABLE_PROPERTIES said so): a retry of pyiceberg's own would make the snapshots again on
    the table as the commit left it, their files under the table's own spec whatever their
    partition."""
    if retries_off(table.metadata):
        return table
    txn = table.transaction().set_properties({TableProperties.COMMIT_NUM_RETRIES: "0"})
    txn.commit_transaction()
    return lake.catalog.table_at(ident, lake.catalog.location_of(session, ident) or "")
