"""Snapshots that take files out of a datasource's table, committed in the caller's
metadata-DB transaction as a publish is: segments marked unused (by a user, or by a drop
rule; their files stay in deep storage until a kill), and a compaction's replacement of an
interval's small files by large ones."""

from __future__ import annotations

import logging
from typing import Any

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFile, ManifestContent
from pyiceberg.table import Table
from sqlalchemy.orm import Session

from supervisor.lake.append import manifests_of
from supervisor.lake.tables import (
    ATTEMPTS,
    Lake,
    LakeConflict,
    Published,
    data_file,
    partition_by,
    time_transform,
    transform_for,
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
    (Lake.footers), when the caller read them already."""
    footers = footers if footers is not None else lake.footers(published)
    ident = lake.identifier(published.datasource)
    wanted = transform_for(*published.intervals[0]) if published.intervals else None
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
            txn = table.transaction()
            # files of a coarser granularity (a month's compacted days) are written under a
            # partitioning of their own, which stays the table's only for this snapshot
            default = txn.table_metadata.spec()
            switched = bool(published.files) and partition_by(txn, wanted)
            metadata = txn.table_metadata
            with txn.update_snapshot(snapshot_properties=published.summary).overwrite() as write:
                for held_file in held:
                    write.delete_data_file(held_file)
                for path, size, footer in (footers[path] for path, _ in published.files):
                    write.append_data_file(data_file(metadata, path, size, footer))
            if switched:
                partition_by(txn, time_transform(default))
            try:
                txn.commit_transaction()
                return
            except CommitFailedException as exc:
                log.info("replace in %s: %s; retried on its new metadata", ident[1], exc)
    raise LakeConflict(f"table {ident[0]}.{published.datasource} moved {ATTEMPTS} times")
