"""Iceberg's JDBC catalog tables (schema V1), where each datasource's Iceberg table is
registered: Spark's JdbcCatalog, pyiceberg's SqlCatalog and Trino's JDBC catalog read them
as they would their own (supervisor/lake/).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the names, types and keys of Iceberg's JdbcUtil (V1: iceberg_type tells tables from views)
    op.create_table(
        "iceberg_tables",
        sa.Column("catalog_name", sa.String(255), primary_key=True),
        sa.Column("table_namespace", sa.String(255), primary_key=True),
        sa.Column("table_name", sa.String(255), primary_key=True),
        sa.Column("metadata_location", sa.String(1000), nullable=True),
        sa.Column("previous_metadata_location", sa.String(1000), nullable=True),
        sa.Column("iceberg_type", sa.String(5), nullable=True),
    )
    op.create_table(
        "iceberg_namespace_properties",
        sa.Column("catalog_name", sa.String(255), primary_key=True),
        sa.Column("namespace", sa.String(255), primary_key=True),
        sa.Column("property_key", sa.String(255), primary_key=True),
        sa.Column("property_value", sa.String(1000), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("iceberg_namespace_properties")
    op.drop_table("iceberg_tables")
