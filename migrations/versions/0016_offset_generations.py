"""How many times each supervisor's committed offsets were reset: its tasks name their segments
with it, so that a range read again after a reset is published anew rather than taken for the
segments the same range made before.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "offset_generations",
        sa.Column("supervisor_id", sa.String(255), primary_key=True),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("offset_generations")
