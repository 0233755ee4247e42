"""Supervisor statuses in the metadata DB: the leader writes them, followers read them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "supervisor_status",
        sa.Column("supervisor_id", sa.String(255), primary_key=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("supervisor_status")
