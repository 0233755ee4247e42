"""Each spec version names the version it was decided on (0: none), once: two requests that
read the same version cannot both append after it (a create, suspend or resume that raced
another is tried again on the newer version).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "supervisor_specs",
        sa.Column("parent_id", sa.Integer(), nullable=False, server_default="0"),
    )
    op.execute(
        "UPDATE supervisor_specs SET parent_id = COALESCE((SELECT MAX(p.id) FROM"
        " supervisor_specs p WHERE p.supervisor_id = supervisor_specs.supervisor_id"
        " AND p.id < supervisor_specs.id), 0)"
    )
    op.create_index(
        "ux_supervisor_specs_parent",
        "supervisor_specs",
        ["supervisor_id", "parent_id"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("ux_supervisor_specs_parent", "supervisor_specs")
    with op.batch_alter_table("supervisor_specs") as batch:
        batch.drop_column("parent_id")
