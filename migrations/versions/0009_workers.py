"""Task hosts (`sluicegate worker`, Druid's MiddleManagers): one row each, kept by its
heartbeats; and the host each task runs on (none: the overlord's own).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("worker", sa.String(255), nullable=True))
    op.create_table(
        "workers",
        sa.Column("host", sa.String(255), primary_key=True),
        sa.Column("scheme", sa.String(8), nullable=False),
        sa.Column("ip", sa.String(64), nullable=False),
        sa.Column("capacity", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("category", sa.String(64), nullable=False),
        sa.Column("token", sa.String(128), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workers")
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("worker")
