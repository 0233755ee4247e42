"""One segment interval's persist files merged into a segment's rows, as the Python-worker
engine's merge (tasks/output/segments.py) and the staging of chunks while a sequence is read
(tasks/output/staging.py) both make them."""

from __future__ import annotations

from typing import Any

from tasks.reading import worker_batch
from tasks.rows import aggregators
from tasks.rows.pipeline import RowPlan
from tasks.storage import LOCAL, Storage

INTERVAL = "__interval"


def merge_columns(plan: RowPlan, dims: list[str]) -> tuple[list[str], Any]:
    """A merge's columns (time, dimensions, metrics, INTERVAL) and how each metric combines
    (None without rollup)."""
    names = ["__time", *dims, *plan.metric_names, INTERVAL]
    combine = [
        (m.name, worker_batch.METRIC_OPS[aggregators.op_of(m)]) for m in plan.schema.metricsSpec
    ]
    return names, combine if plan.rollup else None


def merged_interval(
    start: int,
    files: list[str],
    names: list[str],
    dims: list[str],
    combine: list[tuple[str, str]] | None,
    storage: Storage = LOCAL,
) -> Any:
    """One interval's persist files as a segment's rows: rolled up (`combine`: each metric's
    combining aggregation, None without rollup), sorted by time then dimensions (nulls first),
    times as microseconds, as the columns `names` (the last, INTERVAL, holding `start`)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    fs = storage.filesystem()
    table = pa.concat_tables([_read(pq, path, fs) for path in files])
    keys = ["__time", *dims]
    order = [(key, "ascending", "at_start") for key in keys]
    if combine is not None:
        table = signless_zeros(table, dims)
    table = table.sort_by(order)
    if combine is not None:
        table = rollup_sorted(table, keys, combine, order)
    time = pc.cast(table["__time"], pa.timestamp("ms", tz="UTC"))
    columns = [time.cast(pa.timestamp("us", tz="UTC"))]
    columns += [table[name] for name in names[1:-1]]
    columns.append(pa.array([start] * table.num_rows, pa.int64()))
    return pa.Table.from_arrays(columns, names)


def _read(pq: Any, path: str, fs: Any) -> Any:
    """A persist file as an Arrow table. A task that persists every quarter second leaves ~900
    small files per hour interval: pq.read_table (the dataset machinery per file) read them in
    0.51 s, ParquetFile in 0.19 s."""
    with pq.ParquetFile(path, filesystem=fs) as file:
        return file.read()


def rollup_sorted(
    table: Any, keys: list[str], combine: list[tuple[str, str]], order: list[Any]
) -> Any:
    """Rows sorted by `keys` rolled up (each metric combined by its op), still sorted. Each
    persist is rolled up already, so equal keys sit next to each other in short runs: the runs
    are found by comparing neighbours and each metric reduced over them with numpy, a fraction
    of a hash aggregation and the sort after it. A metric column holding nulls takes the hash
    aggregation (numpy has no null-skipping reduce)."""
    import numpy as np
    import pyarrow as pa

    same = same_as_previous(table, keys)
    if same is None or not same.any():
        return table
    if any(table[name].null_count for name, _ in combine):
        rolled = worker_batch.rollup(table, keys, [(name, op, name) for name, op in combine])
        return rolled.sort_by(order)
    starts = np.flatnonzero(~same)
    reduce = {"sum": np.add, "min": np.minimum, "max": np.maximum}
    columns = {key: table[key].take(starts) for key in keys}
    for name, op in combine:
        values = table[name].to_numpy()
        columns[name] = pa.array(reduce[op].reduceat(values, starts), table[name].type)
    return pa.table(columns)


def signless_zeros(table: Any, dims: list[str]) -> Any:
    """Double dimensions with -0.0 as 0.0, so that both roll up into one row as Spark's
    grouping does (it normalizes them; a sort sees them equal but not their bits)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in dims:
        column = table[name]
        if pa.types.is_floating(column.type):
            index = table.schema.get_field_index(name)
            table = table.set_column(index, name, pc.add(column, pa.scalar(0.0, column.type)))
    return table


def same_as_previous(table: Any, keys: list[str]) -> Any:
    """For rows sorted by `keys`, a numpy bool array: whether each row's keys equal the row
    before's (nulls equal; the first row never); None for fewer than two rows."""
    import numpy as np
    import pyarrow.compute as pc

    if table.num_rows < 2:
        return None
    same = np.ones(table.num_rows, bool)
    same[0] = False
    for key in keys:
        column = table[key]
        after, before = column.slice(1), column.slice(0, table.num_rows - 1)
        equal = pc.fill_null(pc.equal(after, before), False)
        both_null = pc.and_(pc.is_null(after), pc.is_null(before))
        same[1:] &= pc.or_(equal, both_null).to_numpy()
    return same
