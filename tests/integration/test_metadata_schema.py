"""The Alembic migrations build exactly the models' schema, on SQLite and PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from supervisor.db.engine import make_engine, migrate
from supervisor.db.models import Base


def test_migrations_match_the_models(metadata_url: str) -> None:
    engine = make_engine(metadata_url)
    migrate(engine)
    migrate(engine)  # running again is a no-op
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        tables = set(inspect(conn).get_table_names())
    engine.dispose()
    assert diff == []
    assert {
        "supervisor_specs",
        "tasks",
        "committed_offsets",
        "segments",
        "audit_log",
        "alembic_version",
    } <= tables
