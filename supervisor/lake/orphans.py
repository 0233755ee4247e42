"""Orphan files under a datasource's table location (Iceberg's removeOrphanFiles): files no
kept snapshot, no metadata file of the table's log and no segment row names, written over
`older_than` ago (a publish's staged files, which nothing names until its swap, are young).
They are what a crash leaves: the segment files of a publish that never committed, the
metadata a swap wrote before its overlord died, the files an expiry's deletion missed."""

from __future__ import annotations

import logging

import pyarrow.fs as pafs
from sqlalchemy import select
from sqlalchemy.orm import Session

from supervisor.db.models import SegmentRow
from supervisor.lake.append import manifests_of
from supervisor.lake.holdings import live_paths
from supervisor.lake.tables import Lake
from tasks.storage import Storage

log = logging.getLogger(__name__)


def _normal(storage: Storage, uri: str) -> str:
    return storage.fs_path(uri.removeprefix("file://"))


def orphans(
    lake: Lake, storage: Storage, session: Session, datasource: str, older_than: float
) -> list[str]:
    """The file system paths of the datasource's orphan files last written before
    `older_than` (a time.time())."""
    ident = lake.identifier(datasource)
    location = lake.catalog.location_of(session, ident)
    if location is None:
        return []
    table = lake.catalog.table_at(ident, location)
    named = {location, *(entry.metadata_file for entry in table.metadata.metadata_log)}
    for snapshot in table.snapshots():
        named.add(snapshot.manifest_list)
        for manifest in manifests_of(table.io, snapshot):
            named.add(manifest.manifest_path)
            named.update(live_paths(table.io, manifest))
    rows = select(SegmentRow.path).where(SegmentRow.datasource == datasource)
    named.update(session.scalars(rows))
    kept = {_normal(storage, uri) for uri in named}
    root = _normal(storage, table.metadata.location)
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    found = []
    for info in storage.filesystem().get_file_info(selector):
        if info.type != pafs.FileType.File or info.path in kept:
            continue
        written = info.mtime.timestamp() if info.mtime is not None else None
        if written is not None and written < older_than:
            found.append(info.path)
    return sorted(found)


def remove_orphans(
    lake: Lake, storage: Storage, session: Session, datasource: str, older_than: float
) -> list[str]:
    """Delete the datasource's orphan files; the paths deleted."""
    deleted = []
    filesystem = storage.filesystem()
    for path in orphans(lake, storage, session, datasource, older_than):
        try:
            filesystem.delete_file(path)
        except OSError as exc:
            log.warning("orphan %s not deleted: %s", path, exc)
            continue
        deleted.append(path)
    if deleted:
        log.info("%s: %d orphan files deleted", datasource, len(deleted))
    return deleted
