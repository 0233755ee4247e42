"""The initial metadata schema: specs, tasks, committed offsets, segments, audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "supervisor_specs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("supervisor_id", sa.String(255), nullable=False),
        sa.Column("datasource", sa.String(255), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("tombstone", sa.Boolean(), nullable=False),
        sa.Column("suspended", sa.Boolean(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
    )
    op.create_index(
        "ix_supervisor_specs_supervisor_id", "supervisor_specs", ["supervisor_id", "id"]
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(255), primary_key=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("supervisor_id", sa.String(255), nullable=True),
        sa.Column("datasource", sa.String(255), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("error_msg", sa.Text(), nullable=True),
        sa.Column("location_host", sa.String(255), nullable=True),
        sa.Column("location_port", sa.Integer(), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_index("ix_tasks_supervisor_status", "tasks", ["supervisor_id", "status"])
    op.create_index("ix_tasks_datasource", "tasks", ["datasource"])
    op.create_table(
        "committed_offsets",
        sa.Column("supervisor_id", sa.String(255), primary_key=True),
        sa.Column("datasource", sa.String(255), nullable=False),
        sa.Column("stream", sa.String(255), nullable=False),
        sa.Column("offsets", sa.JSON(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "segments",
        sa.Column("id", sa.String(512), primary_key=True),
        sa.Column("datasource", sa.String(255), nullable=False),
        sa.Column("interval_start", TS, nullable=False),
        sa.Column("interval_end", TS, nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("partition_num", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("num_rows", sa.BigInteger(), nullable=False),
        sa.Column("used", sa.Boolean(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_segments_datasource_used", "segments", ["datasource", "used"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("audit_key", sa.String(255), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("author", sa.String(255), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("remote_address", sa.String(255), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_audit_log_key", "audit_log", ["audit_key", "id"])


def downgrade() -> None:
    for table in ("audit_log", "segments", "committed_offsets", "tasks", "supervisor_specs"):
        op.drop_table(table)
