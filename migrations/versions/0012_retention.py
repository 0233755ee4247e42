"""Druid's retention rules per datasource, and when each segment was last marked used or
unused (what the automatic kill's buffer period counts from).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retention_rules",
        sa.Column("datasource", sa.String(255), primary_key=True),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("segments") as batch:
        batch.add_column(
            sa.Column("used_status_last_updated", sa.DateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("segments") as batch:
        batch.drop_column("used_status_last_updated")
    op.drop_table("retention_rules")
