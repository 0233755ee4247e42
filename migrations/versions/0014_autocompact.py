"""A datasource's compaction may be suspended: Druid's autocompact supervisor
(`autocompact__<dataSource>`) is the datasource's compaction config and this flag.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("compaction_configs") as batch:
        batch.add_column(
            sa.Column("suspended", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("compaction_configs") as batch:
        batch.drop_column("suspended")
