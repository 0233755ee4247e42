"""Task runtime columns: the control token, the log path and the final report.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("token", sa.String(64), nullable=True))
        batch.add_column(sa.Column("log_path", sa.Text(), nullable=True))
        batch.add_column(sa.Column("report", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("report")
        batch.drop_column("log_path")
        batch.drop_column("token")
