"""The tables Druid SQL may name here, each as something DuckDB reads in place:

- `druid.<datasource>`: the live data files of the datasource's Iceberg table (its current
  snapshot, supervisor/lake/holdings.py), as an Arrow dataset with the table's schema (a file
  written before a column was added reads it as null);
- `sys.segments`, `sys.tasks`, `sys.supervisors` (and `sys.servers`, `sys.server_segments`,
  empty: no data servers here): the control plane's state, as Arrow tables;
- `INFORMATION_SCHEMA.SCHEMATA`, `TABLES`, `COLUMNS`, as Druid's (JDBC types included, which
  pydruid's SQLAlchemy dialect maps).

A datasource is read with DATASOURCE READ on it: a 403 names it whether or not it exists,
so a query cannot learn which datasources exist by their errors. The system tables hold the
rows of datasources the identity may read, as Druid filters them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
from sqlalchemy.orm import Session

from supervisor.clients.task_api import TaskApiError
from supervisor.clock import druid_timestamp
from supervisor.db.models import TaskRow
from supervisor.db.repositories import SegmentRepository, SpecRepository
from supervisor.db.tasks import TaskRepository
from supervisor.lake.holdings import files_at, tables
from supervisor.lake.tables import Lake
from supervisor.model.status import SupervisorStatus
from supervisor.services.sql_held import HeldFiles, with_held
from supervisor.services.sql_live import Asker, Fetcher, Stale, held_rows, lacks, snapshot
from supervisor.services.sql_tables import (
    INFO_SCHEMAS,
    SYS_SCHEMAS,
    column_row,
    sql_type_of,
    sql_type_of_arrow,
    table_row,
)
from supervisor.services.status import states
from supervisor.services.tasks import status_of
from supervisor.sql.dialect import DRUID, INFORMATION_SCHEMA, SYS, TableRef
from supervisor.sql.errors import SqlError, forbidden, invalid
from tasks.storage import Storage


@dataclass
class LiveReads:
    """How a query reads the rows running tasks hold (sql_live.py, sql_held.py)."""

    asker: Asker  # a task asked which files hold its rows
    fetcher: Fetcher | None = None  # a file fetched from its task (None: such groups lack)
    kept: HeldFiles | None = None  # the held files read into memory by earlier queries
    over_chat: bool = False  # fetch files in work directories even when this machine has them


class Catalog:
    """What one query's tables are, read on its session for the identity `readable` says
    may read a datasource."""

    def __init__(
        self,
        session: Session,
        lake: Lake,
        storage: Storage,
        readable: Callable[[str], bool],
        status: Callable[[str], SupervisorStatus | None],
        now: datetime,
        live: LiveReads | None = None,
    ) -> None:
        self.session, self.lake, self.storage = session, lake, storage
        self.readable, self.status, self.now = readable, status, now
        self._tables: dict[str, str] | None = None
        self._streaming: set[str] | None = None
        self._held_shapes: dict[str, list[tuple[str, str, bool]]] | None = None
        self.live = live  # how running tasks' rows are read (None: published rows only)
        self.tolerant = False  # the query's last try: a publish under it lacks, not a retry
        self.lacking: list[dict[str, Any]] = []  # the task groups whose rows are not read

    @property
    def locations(self) -> dict[str, str]:
        """Each datasource's table: its current metadata file."""
        if self._tables is None:
            self._tables = tables(self.session)
        return self._tables

    @property
    def streaming(self) -> set[str]:
        """The datasources of supervisors, whose tasks may hold rows before a first publish
        (none when held rows are not read)."""
        if self._streaming is None:
            specs = SpecRepository(self.session).all_active() if self.live is not None else []
            self._streaming = {row.datasource for row in specs}
        return self._streaming

    def check(self, ref: TableRef) -> None:
        """The identity may name this table (a 403 first, then a 400 for one not found)."""
        if ref.schema == DRUID:
            if not self.readable(ref.name):
                raise forbidden(f"Unauthorized: may not READ DATASOURCE '{ref.name}'")
            if ref.name not in self.locations and ref.name not in self.streaming:
                raise invalid(f"Object '{ref.name}' not found within 'druid'")
        elif ref.schema == SYS and ref.name not in SYS_SCHEMAS:
            raise invalid(f"Object '{ref.name}' not found within 'sys'")
        elif ref.schema == INFORMATION_SCHEMA and ref.name not in INFO_SCHEMAS:
            raise invalid(f"Object '{ref.name}' not found within 'INFORMATION_SCHEMA'")

    def source(self, ref: TableRef) -> Any:
        """The table as DuckDB reads it."""
        self.check(ref)
        if ref.schema == DRUID:
            return self.datasource(ref.name)
        if ref.schema == SYS:
            rows = getattr(self, f"_sys_{ref.name}")()
            return pa.Table.from_pylist(rows, schema=SYS_SCHEMAS[ref.name])
        rows = getattr(self, f"_info_{ref.name.lower()}")()
        return pa.Table.from_pylist(rows, schema=INFO_SCHEMAS[ref.name])

    def datasource(self, name: str) -> Any:
        """The table's published files, and with an `asker` the rows its running tasks hold
        past the offsets committed with them (read together: sql_live.py). A datasource whose
        first publish is still to come is the rows its tasks hold."""
        found = snapshot(self.session, name) if self.live is not None else None
        location = found.location if found is not None else self.locations.get(name)
        published, schema = None, None
        if location is not None:
            table = self.lake.catalog.table_at(self.lake.identifier(name), location)
            paths = sorted(files_at(self.lake, name, location))
            local = [self.storage.fs_path(path).removeprefix("file://") for path in paths]
            schema = table.schema().as_arrow()
            published = scanned(local, schema, self.storage.filesystem())
        if found is None or self.live is None:
            return published
        live = held_rows(
            self.session,
            name,
            found.committed,
            self.storage,
            self.live.asker,
            self.tolerant,
            self.live.over_chat,
        )
        self.lacking += [{"dataSource": name, **group} for group in live.lacking]
        fetched = [
            rows
            for task, files in live.remote
            if (rows := self._fetched(name, task, files)) is not None
        ]
        if live.files or fetched:
            return with_held(
                published,
                schema,
                live.files,
                self.storage.filesystem(),
                self.live.kept,
                local=not self.storage.is_s3,
                fetched=fetched,
            )
        if published is None:
            raise invalid(
                f"Object '{name}' not found within 'druid' (nothing published, and its tasks"
                " hold no rows yet)"
            )
        return published

    def _fetched(self, name: str, task: TaskRow, files: list[str]) -> pa.Table | None:
        """A task group's held rows from its task (its files are on another machine's disk);
        None when they cannot be (the group is then named lacking). A 409 is a publish since
        the committed offsets were read: the query reads again, unless this is its last try."""
        assert self.live is not None
        fetcher = self.live.fetcher
        reason = "its persists are on its task host's disk"
        if fetcher is not None:
            try:
                kept = self.live.kept or HeldFiles(0)
                return kept.fetched(task.id, files, lambda path: fetcher(task, path))
            except TaskApiError as exc:
                if exc.status_code == 409 and not self.tolerant:
                    raise Stale(str(exc)) from None
                reason = f"its persists could not be fetched: {exc}"
        self.lacking.append({"dataSource": name, **lacks(task, reason)})
        return None

    def columns(self, name: str) -> list[tuple[str, str, bool]]:
        """The datasource's columns: name, SQL type, nullable."""
        location = self.locations[name]
        schema = self.lake.catalog.table_at(self.lake.identifier(name), location).schema()
        return [
            (field.name, sql_type_of(field.field_type), field.name != "__time")
            for field in schema.fields
        ]

    def _readable_datasources(self) -> list[str]:
        return sorted(name for name in self.locations if self.readable(name))

    def _sys_segments(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for name in self._readable_datasources():
            live = files_at(self.lake, name, self.locations[name])
            for row in SegmentRepository(self.session).used(name):
                if row.path not in live:
                    continue
                payload = row.payload or {}
                rows.append(
                    {
                        "segment_id": row.id,
                        "datasource": row.datasource,
                        "start": druid_timestamp(row.interval_start),
                        "end": druid_timestamp(row.interval_end),
                        "size": row.size_bytes,
                        "version": row.version,
                        "partition_num": row.partition_num,
                        "num_replicas": 1,
                        "num_rows": row.num_rows,
                        "is_active": 1,
                        "is_published": 1,
                        "is_available": 1,
                        "is_realtime": 0,
                        "is_overshadowed": 0,
                        "shard_spec": json.dumps(
                            {"type": "numbered", "partitionNum": row.partition_num}
                        ),
                        "dimensions": json.dumps(payload.get("dimensions", [])),
                        "metrics": json.dumps(payload.get("metrics", [])),
                        "last_compaction_state": None,
                        "replication_factor": 1,
                    }
                )
        return rows

    def _sys_tasks(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for row in TaskRepository(self.session).find(None, None, None, None, None):
            if not self.readable(row.datasource):
                continue
            plus = status_of(row, self.now)
            location: dict[str, Any] = plus["location"]  # type: ignore[assignment]
            rows.append(
                {
                    "task_id": row.id,
                    "group_id": plus["groupId"],
                    "type": row.type,
                    "datasource": row.datasource,
                    "created_time": plus["createdTime"],
                    "queue_insertion_time": plus["queueInsertionTime"],
                    "status": row.status,
                    "runner_status": plus["runnerStatusCode"],
                    "duration": plus["duration"],
                    "location": json.dumps(location) if location.get("host") else None,
                    "host": location.get("host"),
                    "plaintext_port": location.get("port", -1),
                    "tls_port": -1,
                    "error_msg": row.error_msg,
                }
            )
        return rows

    def _sys_supervisors(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for row in SpecRepository(self.session).all_active():
            if not self.readable(row.datasource):
                continue
            state = states(self.status(row.supervisor_id), row.suspended)
            io = (row.payload.get("spec") or {}).get("ioConfig") or {}
            rows.append(
                {
                    "supervisor_id": row.supervisor_id,
                    "state": state["state"],
                    "detailed_state": state["detailedState"],
                    "healthy": int(bool(state["healthy"])),
                    "type": row.payload.get("type", "kafka"),
                    "source": io.get("topic") or io.get("topicPattern"),
                    "suspended": int(row.suspended),
                    "spec": None,  # secrets stay out of SQL; the supervisor API masks them
                }
            )
        return rows

    def _sys_servers(self) -> list[dict[str, Any]]:
        return []

    def _sys_server_segments(self) -> list[dict[str, Any]]:
        return []

    def _info_schemata(self) -> list[dict[str, Any]]:
        return [
            {"CATALOG_NAME": DRUID, "SCHEMA_NAME": schema, "SCHEMA_OWNER": None}
            for schema in (DRUID, INFORMATION_SCHEMA, SYS)
        ]

    def _held_only(self) -> dict[str, list[tuple[str, str, bool]]]:
        """The readable datasources before their first publish whose tasks hold rows, with
        the columns they have (as a query reads them), for INFORMATION_SCHEMA."""
        if self._held_shapes is None:
            self._held_shapes = {}
            for name in sorted(self.streaming - set(self.locations)):
                if not self.readable(name):
                    continue
                try:
                    source = self.datasource(name)
                except SqlError as exc:
                    if exc.status != 400:  # (no rows held yet); a publish under it: again
                        raise
                    continue
                schema = source.held[0].schema
                self._held_shapes[name] = [
                    (
                        column,
                        "TIMESTAMP"
                        if column == "__time"
                        else sql_type_of_arrow(schema.field(column).type),
                        column != "__time",
                    )
                    for column in source.columns + source.extra
                ]
        return self._held_shapes

    def _info_tables(self) -> list[dict[str, Any]]:
        names = self._readable_datasources() + list(self._held_only())
        rows = [table_row(DRUID, name, "TABLE") for name in sorted(names)]
        rows += [table_row(INFORMATION_SCHEMA, name, "SYSTEM_TABLE") for name in INFO_SCHEMAS]
        rows += [table_row(SYS, name, "SYSTEM_TABLE") for name in SYS_SCHEMAS]
        return rows

    def _info_columns(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for name in self._readable_datasources():
            for position, (column, kind, nullable) in enumerate(self.columns(name), start=1):
                rows.append(column_row(DRUID, name, column, position, kind, nullable))
        for name, shape in self._held_only().items():
            for position, (column, kind, nullable) in enumerate(shape, start=1):
                rows.append(column_row(DRUID, name, column, position, kind, nullable))
        for schema, shapes in ((INFORMATION_SCHEMA, INFO_SCHEMAS), (SYS, SYS_SCHEMAS)):
            for name, shape in shapes.items():
                for position, item in enumerate(shape, start=1):
                    kind = "BIGINT" if pa.types.is_integer(item.type) else "VARCHAR"
                    rows.append(column_row(schema, name, item.name, position, kind, True))
        return rows


def scanned(paths: list[str], schema: pa.Schema, filesystem: Any) -> Any:
    """The published files as DuckDB scans them: with the table's schema, string columns read
    as dictionaries (as Druid keeps its string dimensions). DuckDB takes a dictionary column
    as VARCHAR; it groups and filters one several times faster than a column of strings."""
    strings = [
        f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
    ]
    shaped = pa.schema(
        [
            pa.field(f.name, pa.dictionary(pa.int32(), f.type)) if f.name in strings else f
            for f in schema
        ]
    )
    options = pads.ParquetReadOptions(dictionary_columns=strings)
    return pads.dataset(
        paths,
        schema=shaped,
        format=pads.ParquetFileFormat(read_options=options),
        filesystem=filesystem,
    )
