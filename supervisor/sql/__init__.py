"""Druid's SQL API over what Sluicegate holds: Druid SQL translated to DuckDB (dialect.py,
functions.py), run in an embedded DuckDB bounded in memory, threads and time (engine.py), and
written in Druid's result formats (results.py). The tables a query may name are the catalog's
(supervisor/services/sql_catalog.py): the datasources' published Iceberg tables, the `sys`
tables of the control plane's state, and INFORMATION_SCHEMA."""
