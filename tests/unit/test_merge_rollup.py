"""The merge's roll-up of sorted runs (tasks/output/segments.py) against a hash roll-up of the same
rows (tasks/reading/worker_batch.py rollup), on tables like a sequence's concatenated persists."""

from __future__ import annotations

import math
import random

import pyarrow as pa

from tasks.output import interval_merge
from tasks.reading import worker_batch

KEYS = ["__time", "channel", "n"]
ORDER = [(key, "ascending", "at_start") for key in KEYS]
COMBINE = [("count", "sum"), ("least", "min"), ("most", "max")]


def _table(rows: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    return pa.table(
        {
            "__time": pa.array([rng.choice([0, 60_000, 120_000]) for _ in range(rows)], pa.int64()),
            "channel": pa.array([rng.choice(["a", "b", None]) for _ in range(rows)]),
            "n": pa.array([rng.choice([1, 2, None]) for _ in range(rows)], pa.int64()),
            "count": pa.array([rng.randrange(1, 5) for _ in range(rows)], pa.int64()),
            "least": pa.array([rng.randrange(-50, 50) for _ in range(rows)], pa.int64()),
            "most": pa.array([rng.uniform(-1, 1) for _ in range(rows)], pa.float64()),
        }
    )


def test_sorted_runs_roll_up_as_a_hash_aggregation_does() -> None:
    for seed, rows in [(1, 0), (2, 1), (3, 2), (4, 40), (5, 500)]:
        table = _table(rows, seed)
        # two chunks, as concatenated persists are
        table = pa.concat_tables([table.slice(0, rows // 2), table.slice(rows // 2)])
        table = table.sort_by(ORDER)
        got = interval_merge.rollup_sorted(table, KEYS, COMBINE, ORDER)
        expected = worker_batch.rollup(table, KEYS, [(name, op, name) for name, op in COMBINE])
        assert got.to_pylist() == expected.sort_by(ORDER).to_pylist(), seed


def test_a_metric_with_nulls_takes_the_hash_aggregation() -> None:
    table = _table(60, 7)
    table = table.set_column(4, "least", pa.array([None] * 60, pa.int64())).sort_by(ORDER)
    got = interval_merge.rollup_sorted(table, KEYS, COMBINE, ORDER)
    assert got.num_rows < table.num_rows
    assert got["least"].null_count == got.num_rows
    assert sum(got["count"].to_pylist()) == sum(table["count"].to_pylist())


def test_negative_zero_rolls_up_with_zero_as_spark_groups_it() -> None:
    table = pa.table(
        {
            "__time": pa.array([0, 0, 0, 0], pa.int64()),
            "d": pa.array([0.0, -0.0, 0.0, None], pa.float64()),
            "count": pa.array([1, 2, 3, 4], pa.int64()),
        }
    )
    order = [(key, "ascending", "at_start") for key in ("__time", "d")]
    table = interval_merge.signless_zeros(table, ["d"]).sort_by(order)
    got = interval_merge.rollup_sorted(
        table, ["__time", "d"], [("count", "sum")], order
    ).to_pylist()
    assert got == [{"__time": 0, "d": None, "count": 4}, {"__time": 0, "d": 0.0, "count": 6}]
    assert math.copysign(1.0, got[1]["d"]) == 1.0
