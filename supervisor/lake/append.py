"""A publish's snapshot, assembled from pyiceberg's own parts with one metadata update.

pyiceberg's Transaction re-applies its updates to a deep copy of the whole table metadata on
every read of `table_metadata`, some twenty times per append; at 200 supervisors publishing
every 5 s that cost the overlord ~40 ms a publish (bench/publish.py: p50 1.5 s, queued). A
publish is one case only: data files added to `main` of a table whose schema, partitioning
and name mapping already hold them. Here that case writes its manifest and its manifest list
with pyiceberg's writers, builds the Snapshot and its summary with pyiceberg's models and
collectors, and gives the catalog the same updates and requirements pyiceberg's fast append
gives (AddSnapshot, SetSnapshotRef main; AssertTableUUID, AssertRefSnapshotId main). Nothing
here writes an Iceberg format itself. Every other case (a new table, a new column, another
partitioning) goes through pyiceberg's Transaction (tables.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.table import TableProperties
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import (
    Operation,
    Snapshot,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetSnapshotRefUpdate,
    TableRequirement,
    TableUpdate,
)

from supervisor.lru import CACHE_BYTES, Lru

# the manifests of each manifest list read or written here (a file never changes), within
# about CACHE_BYTES (a manifest's entry weighs about a KiB); an expiry that deletes a list
# forgets it
MANIFEST_ENTRY_BYTES = 1024
_MANIFESTS: Lru[str, list[ManifestFile]] = Lru(10_000, CACHE_BYTES, name="manifest lists")


def _remember(listing: str, manifests: list[ManifestFile]) -> None:
    _MANIFESTS.put(listing, manifests, len(manifests) * MANIFEST_ENTRY_BYTES)


def forget(manifest_lists: list[str]) -> None:
    """Deleted manifest lists, not asked for again: out of the cache."""
    for listing in manifest_lists:
        _MANIFESTS.discard(listing)


def manifests_of(io: FileIO, snapshot: Snapshot | None) -> list[ManifestFile]:
    """A snapshot's manifests (read once per manifest list; a commit here remembers its own)."""
    if snapshot is None:
        return []
    found = _MANIFESTS.get(snapshot.manifest_list)
    if found is None:
        found = list(snapshot.manifests(io))
        _remember(snapshot.manifest_list, found)
    return found


def append(
    io: FileIO,
    metadata: TableMetadata,
    files: list[DataFile],
    properties: dict[str, str],
) -> tuple[tuple[TableUpdate, ...], tuple[TableRequirement, ...], list[str]]:
    """The updates and requirements of a snapshot adding `files` to `main` of the table as
    `metadata` has it, and the files written for it (to delete should the commit not happen).
    """
    snapshot_id = metadata.new_snapshot_id()
    parent = metadata.snapshot_by_name(MAIN_BRANCH)
    commit = uuid.uuid4()
    locations = load_location_provider(metadata.location, metadata.properties)
    compression: Any = metadata.properties.get(
        TableProperties.WRITE_AVRO_COMPRESSION, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT
    )
    written: list[str] = []
    manifests = carried(manifests_of(io, parent))
    merged = merging(metadata, manifests)
    if files or merged:
        path = locations.new_metadata_location(f"{commit}-m0.avro")
        written.append(path)
        output = io.new_output(path)
        made = _manifest(output, metadata, snapshot_id, files, _existing(io, merged), compression)
        manifests = [made, *(m for m in manifests if m not in merged)]
    sequence_number = metadata.next_sequence_number()
    listing = locations.new_metadata_location(f"snap-{snapshot_id}-0-{commit}.avro")
    written.append(listing)
    with write_manifest_list(
        format_version=metadata.format_version,
        output_file=io.new_output(listing),
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id if parent else None,
        sequence_number=sequence_number,
        avro_compression=compression,
    ) as list_writer:
        list_writer.add_manifests(manifests)
    _remember(listing, manifests)
    summary = _summary(metadata, parent, files, properties)
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id if parent else None,
        manifest_list=listing,
        sequence_number=sequence_number,
        summary=summary,
        schema_id=metadata.current_schema_id,
    )
    updates: tuple[TableUpdate, ...] = (
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(  # type: ignore[call-arg]  # (its retention fields: defaults)
            snapshot_id=snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent else None,
            ref_name=MAIN_BRANCH,
            type=SnapshotRefType.BRANCH,
        ),
    )
    requirements: tuple[TableRequirement, ...] = (
        AssertTableUUID(uuid=metadata.table_uuid),
        AssertRefSnapshotId(snapshot_id=parent.snapshot_id if parent else None, ref=MAIN_BRANCH),
    )
    return updates, requirements, written


def carried(manifests: list[ManifestFile]) -> list[ManifestFile]:
    """The parent's manifests the next snapshot keeps: those with a live file (added or
    existing), as pyiceberg's and Iceberg's appends keep. A manifest of only DELETED entries
    (a compaction's, a kill's or a drop's record of what it removed) speaks for the snapshot
    that wrote it; carried on, the soak's tables each held ~50 such in every snapshot, one
    more a minute until a merge, each opened by every scan's planning."""
    return [m for m in manifests if m.has_added_files() or m.has_existing_files()]


def merging(metadata: TableMetadata, manifests: list[ManifestFile]) -> list[ManifestFile]:
    """The manifests the next snapshot merges into its own, as Iceberg's merging append does
    (on by default in Iceberg's Java library; `commit.manifest-merge.enabled`): once the data
    manifests of the current partitioning smaller than `commit.manifest.target-size-bytes`
    (8 MB) would reach `commit.manifest.min-count-to-merge` (100), all of them. A manifest list
    so holds fewer than that many small manifests, and a publish's cost stays flat."""
    properties = metadata.properties
    if properties.get(TableProperties.MANIFEST_MERGE_ENABLED, "true").lower() != "true":
        return []
    at = int(
        properties.get(
            TableProperties.MANIFEST_MIN_MERGE_COUNT,
            TableProperties.MANIFEST_MIN_MERGE_COUNT_DEFAULT,
        )
    )
    target = int(
        properties.get(
            TableProperties.MANIFEST_TARGET_SIZE_BYTES,
            TableProperties.MANIFEST_TARGET_SIZE_BYTES_DEFAULT,
        )
    )
    small = [
        m
        for m in manifests
        if m.content == ManifestContent.DATA
        and m.partition_spec_id == metadata.default_spec_id
        and m.manifest_length < target
    ]
    return small if len(small) + 1 >= at else []


def _existing(io: FileIO, manifests: list[ManifestFile]) -> Iterator[ManifestEntry]:
    """The live entries of `manifests` (a deleted file's entry is dropped)."""
    for manifest in manifests:
        yield from manifest.fetch_manifest_entry(io, discard_deleted=True)


def _manifest(
    output: Any,
    metadata: TableMetadata,
    snapshot_id: int,
    files: list[DataFile],
    existing: Iterator[ManifestEntry],
    compression: Any,
) -> ManifestFile:
    """The snapshot's manifest: its files, ADDED, and the entries of the manifests it merges,
    EXISTING (each keeping the snapshot and sequence numbers that added it)."""
    with write_manifest(
        format_version=metadata.format_version,
        spec=metadata.spec(),
        schema=metadata.schema(),
        output_file=output,
        snapshot_id=snapshot_id,
        avro_compression=compression,
    ) as writer:
        for data_file in files:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED,
                    snapshot_id=snapshot_id,
                    sequence_number=None,
                    file_sequence_number=None,
                    data_file=data_file,
                )
            )
        for entry in existing:
            writer.existing(entry)
    return writer.to_manifest_file()


def _summary(
    metadata: TableMetadata,
    parent: Snapshot | None,
    files: list[DataFile],
    properties: dict[str, str],
) -> Summary:
    """An append's summary: its files' counts and partitions, the totals carried from its
    parent's, and the caller's properties."""
    limit = metadata.properties.get(
        TableProperties.WRITE_PARTITION_SUMMARY_LIMIT,
        TableProperties.WRITE_PARTITION_SUMMARY_LIMIT_DEFAULT,
    )
    collector = SnapshotSummaryCollector(partition_summary_limit=int(limit))
    schema, spec = metadata.schema(), metadata.spec()
    for data_file in files:
        collector.add_file(data_file=data_file, partition_spec=spec, schema=schema)
    return update_snapshot_summaries(
        summary=Summary(operation=Operation.APPEND, **collector.build(), **properties),
        previous_summary=parent.summary if parent is not None else None,
    )
