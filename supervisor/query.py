"""SQL over what was ingested: one Spark view per datasource over its published, used segments
(as the service lists them), with `__time` a timestamp column.

    from supervisor.query import sql
    frame = sql("SELECT channel, SUM(added) FROM wikipedia GROUP BY 1")   # a Spark DataFrame
"""

from __future__ import annotations

from typing import Any

from supervisor.cli.client import DEFAULT_URL
from supervisor.cli.views import local_session, published_files, register_views

__all__ = ["local_session", "published_files", "register_views", "sql"]


def sql(query: str, url: str = DEFAULT_URL, spark: Any = None) -> Any:
    """Run Spark SQL over the published segments; the result as a Spark DataFrame. Without a
    session, a local one is started (`local[*]`)."""
    if spark is None:
        spark = local_session()
    register_views(spark, published_files(url))
    return spark.sql(query)
