"""The overlords' leader lease: one row, free (expired) until an overlord takes it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    lease = op.create_table(
        "leader_lease",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(255), nullable=False),
        sa.Column("holder_url", sa.String(255), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("expires_at_s", sa.Float(), nullable=False),
        sa.Column("acquired_at_s", sa.Float(), nullable=False),
    )
    op.bulk_insert(
        lease,
        [
            {
                "name": "overlord",
                "holder": "",
                "holder_url": "",
                "epoch": 0,
                "expires_at_s": 0.0,
                "acquired_at_s": 0.0,
            }
        ],
    )


def downgrade() -> None:
    op.drop_table("leader_lease")
