"""What the tests and the benchmarks share: the overlord in a thread and as a process, task
hosts, the numbered producer with its exactly-once ledger, waits, percentiles, the network
and the fault hooks. Nothing of the product imports it; it may import anything of the
product (tests/unit/test_import_direction.py)."""
