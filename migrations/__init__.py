"""Alembic migrations of the metadata DB (run to head by `sluicegate serve` on start)."""
