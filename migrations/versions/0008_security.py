"""Users, API tokens, roles and their permissions (Druid's basic security, in the metadata DB);
the scheme each task serves its chat API with (https when the overlord serves TLS).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("location_scheme", sa.String(8), nullable=True))
    op.create_table(
        "authn_users",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("password_hash", sa.String(255), nullable=True),
        sa.Column("salt", sa.String(255), nullable=True),
        sa.Column("iterations", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("user_name", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ux_api_tokens_user_name", "api_tokens", ["user_name", "name"], unique=True)
    op.create_table("authz_users", sa.Column("name", sa.String(255), primary_key=True))
    op.create_table(
        "authz_roles",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("permissions", sa.JSON(), nullable=False),
    )
    op.create_table(
        "authz_user_roles",
        sa.Column("user_name", sa.String(255), primary_key=True),
        sa.Column("role_name", sa.String(255), primary_key=True),
    )


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("location_scheme")
    for table in ("authz_user_roles", "authz_roles", "authz_users", "api_tokens", "authn_users"):
        op.drop_table(table)
