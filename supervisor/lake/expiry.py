"""Snapshots expired from a datasource's table, and the files only they named deleted once
that expiry commits (Iceberg's expireSnapshots with its file cleanup): their manifest lists,
the manifests no kept snapshot lists, and the data files no kept snapshot holds that the
caller lets go (a killed segment's; never an unused segment's, which markUsed may still bring
back). The current snapshot is never expired."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestContent
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from sqlalchemy.orm import Session

from supervisor.lake import append, holdings
from supervisor.lake.append import manifests_of
from supervisor.lake.catalog import after_commit
from supervisor.lake.holdings import live_paths
from supervisor.lake.tables import ATTEMPTS, Lake, LakeConflict

log = logging.getLogger(__name__)


@dataclass
class Expired:
    """What an expiry let go of: deleted once it commits."""

    snapshots: list[int] = field(default_factory=list)
    manifest_lists: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)


def expire(
    lake: Lake,
    session: Session,
    datasource: str,
    pick: Callable[[Table], set[int]],
    deletable: Callable[[set[str]], set[str]],
) -> Expired:
    """Expire the snapshots `pick` names (of the table as it is; the current one is kept) in
    `session`'s transaction (not committed here). Once it commits, the files only they named
    are deleted, data files only where `deletable` (given those no kept snapshot holds) says."""
    ident = lake.identifier(datasource)
    with lake.catalog.bound(session):
        for _ in range(ATTEMPTS):
            location = lake.catalog.location_of(session, ident)
            if location is None:
                return Expired()
            table = lake.catalog.table_at(ident, location)
            current = table.current_snapshot()
            chosen = pick(table) - ({current.snapshot_id} if current is not None else set())
            if not chosen:
                return Expired()
            expired = _let_go(table, chosen, deletable)
            try:
                table.maintenance.expire_snapshots().by_ids(sorted(chosen)).commit()
            except CommitFailedException as exc:
                log.info("expiry in %s: %s; retried on its new metadata", datasource, exc)
                continue
            after_commit(session, partial(_delete, table.io, expired, datasource))
            return expired
    raise LakeConflict(f"table {ident[0]}.{datasource} moved {ATTEMPTS} times")


def _let_go(table: Table, chosen: set[int], deletable: Callable[[set[str]], set[str]]) -> Expired:
    io = table.io
    kept = [s for s in table.snapshots() if s.snapshot_id not in chosen]
    gone = [s for s in table.snapshots() if s.snapshot_id in chosen]
    kept_manifests = {m.manifest_path for s in kept for m in manifests_of(io, s)}
    kept_files = data_files(io, kept)
    gone_manifests = {m.manifest_path for s in gone for m in manifests_of(io, s)}
    only_gone = data_files(io, gone) - kept_files
    return Expired(
        snapshots=sorted(chosen),
        manifest_lists=[s.manifest_list for s in gone],
        manifests=sorted(gone_manifests - kept_manifests),
        data_files=sorted(deletable(only_gone)),
    )


def data_files(io: FileIO, snapshots: list[Snapshot]) -> set[str]:
    """The paths of the data files any of these snapshots holds."""
    found: set[str] = set()
    for snapshot in snapshots:
        for manifest in manifests_of(io, snapshot):
            if manifest.content != ManifestContent.DATA:
                continue
            found.update(live_paths(io, manifest))
    return found


def delete_files(io: FileIO, paths: list[str]) -> int:
    """Delete the files (gone already is fine); how many could not be: orphans, which the
    orphan-file removal takes later."""
    failed = 0
    for path in paths:
        try:
            io.delete(path)
        except FileNotFoundError:
            continue
        except Exception as exc:
            failed += 1
            log.debug("%s not deleted: %s", path, exc)
    return failed


def _delete(io: FileIO, expired: Expired, datasource: str) -> None:
    holdings.forget(expired.manifests)
    append.forget(expired.manifest_lists)
    failed = delete_files(io, [*expired.data_files, *expired.manifests, *expired.manifest_lists])
    if failed:
        log.warning("%s: %d files of expired snapshots not deleted", datasource, failed)
    log.info(
        "%s: %d snapshots expired; %d data files, %d manifests, %d manifest lists deleted",
        datasource,
        len(expired.snapshots),
        len(expired.data_files),
        len(expired.manifests),
        len(expired.manifest_lists),
    )
