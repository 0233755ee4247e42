"""Cluster-wide configs an operator sets at run time, by name (Druid's dynamic configs): the
first is the cluster's compaction config (compactionTaskSlotRatio, maxCompactionTaskSlots,
compactionPolicy).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dynamic_configs",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("dynamic_configs")
