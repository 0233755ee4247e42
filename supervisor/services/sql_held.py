"""The files of the rows running tasks hold, as the SQL API reads them with the published table
(which files they are and why exactly those: sql_live.py).

A task writes a persist per micro-batch, so a datasource's held rows are many small files,
and a query that opens each of them again pays a footer read and a scan set-up per file: at
a few hundred files that is most of a query's time, and it grows with the held rows until a
publish. The overlord therefore keeps the held files it has read in memory, as Arrow tables,
up to `SQL_HELD_CACHE_MB`: a poll reads only the persists written since the last one. Past
that bound, each query scans the rest in their files.

A persist's file is written whole before its task lists it, under a name no other persist has
(its task's id, sequence and count), and never changed; still, a file read here is known by what
it is, its path, size and modification time in nanoseconds, as a cache that outlives files
should. Files in S3 are scanned in place each time (a stat costs a request there, and its time
is in seconds). Files on another machine's disk are fetched from their task as Arrow, kept by
task and path."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from supervisor.lru import Lru
from supervisor.sql.engine import WithHeld
from supervisor.sql.errors import SqlError
from tasks.protocol import TIME_SUFFIX

MAX_FILES_KEPT = 1_000_000  # the count bound; the bytes bound is the operator's


class Gone(SqlError):
    """A held file was deleted (its rows published) between the task's answer and the read:
    the query reads again, from newer offsets."""

    def __init__(self, path: str) -> None:
        name = path.rsplit("/", 1)[-1]
        super().__init__(503, "unavailable", "RUNTIME_FAILURE", f"a task published: {name} is gone")


@dataclass
class Read:
    """The held files: those in memory (one table each) and those to scan from disk."""

    tables: list[pa.Table]
    on_disk: list[str]


class HeldFiles:
    """The held files read so far, at most `capacity` bytes of Arrow memory in all."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._kept: Lru[tuple[str, int, int], tuple[pa.Table, int]] = Lru(
            MAX_FILES_KEPT, max_weight=capacity, name="sql_held_files"
        )

    def read(self, files: list[str], filesystem: Any, local: bool) -> Read:
        """Each file from memory, or read into it while this query's share stays within the
        capacity (so that a query never pushes out its own files); the rest on disk."""
        if not local or self.capacity <= 0 or not files:
            return Read([], list(files))
        tables: list[pa.Table] = []
        on_disk: list[str] = []
        used = 0
        for path, info in zip(files, filesystem.get_file_info(files), strict=True):
            if info.type != pafs.FileType.File:
                raise Gone(path)
            key = (path, int(info.size or 0), int(info.mtime_ns or 0))
            entry = self._kept.get(key)
            if entry is None and used < self.capacity:
                table = _read(path, filesystem)
                entry = (table, table.nbytes)
                self._kept.put(key, entry, entry[1])
            if entry is None or used + entry[1] > self.capacity:
                on_disk.append(path)
                continue
            used += entry[1]
            tables.append(entry[0])
        return Read(tables, on_disk)

    def fetched(self, task_id: str, files: list[str], get: Callable[[str], bytes]) -> pa.Table:
        """A task's held files, from memory or fetched from it (`get`: a file's Arrow stream),
        as one table; kept within the capacity as the files read here are."""
        tables = []
        for path in files:
            key = (f"{task_id}:{path}", 0, 0)  # a task's persists are written once, by name
            entry = self._kept.get(key)
            if entry is None:
                try:
                    table = pa.ipc.open_stream(get(path)).read_all()
                except pa.ArrowInvalid as exc:
                    raise SqlError(
                        503, "unavailable", "RUNTIME_FAILURE", f"{path}: not an Arrow stream: {exc}"
                    ) from None
                entry = (table, table.nbytes)
                if self.capacity > 0:
                    self._kept.put(key, entry, entry[1])
            tables.append(entry[0])
        return pa.concat_tables(tables, promote_options="permissive")


def _read(path: str, filesystem: Any) -> pa.Table:
    try:
        return pq.read_table(path, filesystem=filesystem)
    except FileNotFoundError:
        raise Gone(path) from None


def with_held(
    published: Any,
    schema: pa.Schema | None,
    files: list[str],
    filesystem: Any,
    kept: HeldFiles | None = None,
    local: bool = True,
    fetched: list[pa.Table] | None = None,
) -> WithHeld:
    """The published dataset (with the table's `schema`; None before a first publish) and the
    held files as one table: the table's columns, then those only the persists have (a
    dimension discovered since the last publish), each with the type it first has. A
    persist's `__time` is milliseconds since the epoch (the view makes it a timestamp). With
    `kept`, the files it holds (or can) are read from memory (`local`: files on this disk);
    `fetched`, the held rows fetched from their tasks."""
    read = (kept or HeldFiles(0)).read(files, filesystem, local)
    read.tables += fetched or []
    found: dict[str, pa.DataType] = {"__time": pa.int64()}
    schemas = [table.schema for table in read.tables]
    schemas += [pq.read_schema(path, filesystem=filesystem) for path in read.on_disk]
    for each in schemas:
        for item in each:
            if not item.name.endswith(TIME_SUFFIX):
                found.setdefault(item.name, item.type)
    known = list(schema) if schema is not None else [pa.field(n, k) for n, k in found.items()]
    fields = [pa.field("__time", pa.int64()) if f.name == "__time" else f for f in known]
    names = [f.name for f in fields]
    extra = [pa.field(name, kind) for name, kind in found.items() if name not in names]
    whole = pa.schema(fields + extra)
    held: list[Any] = []
    if read.tables:
        held.append(_in_memory(read.tables, whole))
    if read.on_disk:
        held.append(
            pads.dataset(read.on_disk, schema=whole, format="parquet", filesystem=filesystem)
        )
    return WithHeld(published, held, names, [f.name for f in extra])


def _in_memory(tables: list[pa.Table], whole: pa.Schema) -> pa.Table:
    """The tables as one, with every column of `whole` (null where none of them has it). The
    types may differ from the published ones' (a persist's `string`, the table's
    `large_string`): the view's UNION ALL makes them one, so nothing is copied here. Tables
    whose own types do not merge (a column a long in one persist, a string in another) are
    cast to `whole`'s, each, as a scan of their files would."""
    try:
        merged = pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        loose = pa.schema([pa.field(f.name, f.type) for f in whole])  # nullable, as a union is
        return pa.concat_tables([_conformed(table, loose) for table in tables])
    columns = [
        merged.column(f.name) if f.name in merged.column_names else pa.nulls(len(merged), f.type)
        for f in whole
    ]
    return pa.Table.from_arrays(columns, names=whole.names)


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The table with the schema's columns, in its order and types (null where it has none)."""
    columns = []
    for item in schema:
        if item.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, item.type))
            continue
        column = table.column(item.name)
        columns.append(column if column.type == item.type else column.cast(item.type))
    return pa.Table.from_arrays(columns, schema=schema)
