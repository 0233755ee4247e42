"""What the datasources' tables hold now: the tables of the catalog, and each one's live data
files as its current snapshot's manifests list them. This, not the `segments` rows, is what
is published: the segments API, the console and `sluicegate sql` list what is here.

A manifest never changes once written, so each is read once (an LRU of its live paths); a
table's listing reads only the manifests of snapshots committed since it was last asked."""

from __future__ import annotations

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestContent, ManifestFile
from sqlalchemy import select
from sqlalchemy.orm import Session

from supervisor.db.models import IcebergTableRow as IcebergTables
from supervisor.lake.append import manifests_of
from supervisor.lake.catalog import NAMESPACE
from supervisor.lake.tables import CATALOG, Lake
from supervisor.lru import CACHE_BYTES, Lru

# the live (added or existing) data files of each manifest read here, within about
# CACHE_BYTES (a path's length and a pointer's and string's keep); an expiry that deletes a
# manifest forgets it
_LIVE: Lru[str, tuple[str, ...]] = Lru(100_000, CACHE_BYTES, name="live files")


def forget(manifests: list[str]) -> None:
    """Deleted manifests, not asked for again: out of the cache."""
    for path in manifests:
        _LIVE.discard(path)


def tables(session: Session) -> dict[str, str]:
    """The datasources that have a table: each one's current metadata location, by name."""
    query = select(IcebergTables.table_name, IcebergTables.metadata_location).where(
        IcebergTables.catalog_name == CATALOG,
        IcebergTables.table_namespace == NAMESPACE,
        IcebergTables.metadata_location.is_not(None),
    )
    return {name: location for name, location in session.execute(query) if location}


def live_files(lake: Lake, session: Session, datasource: str) -> set[str] | None:
    """The paths of the data files the datasource's table holds in its current snapshot
    (empty: none, as after a reset of a table that held none); None: it has no table."""
    location = lake.catalog.location_of(session, lake.identifier(datasource))
    return None if location is None else files_at(lake, datasource, location)


def files_at(lake: Lake, datasource: str, location: str) -> set[str]:
    """The live data files of the datasource's table as its metadata file `location` has it."""
    table = lake.catalog.table_at(lake.identifier(datasource), location)
    paths: set[str] = set()
    for manifest in manifests_of(table.io, table.current_snapshot()):
        if manifest.content == ManifestContent.DATA:
            paths.update(live_paths(table.io, manifest))
    return paths


def live_paths(io: FileIO, manifest: ManifestFile) -> tuple[str, ...]:
    """The paths of a manifest's live (added or existing) data files, read once."""
    found = _LIVE.get(manifest.manifest_path)
    if found is None:
        entries = manifest.fetch_manifest_entry(io, discard_deleted=True)
        found = tuple(entry.data_file.file_path for entry in entries)
        _LIVE.put(manifest.manifest_path, found, sum(len(path) + 64 for path in found))
    return found
