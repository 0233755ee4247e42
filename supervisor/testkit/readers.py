"""What the tests read published tables with, as a user would: Spark with Iceberg's runtime,
through `sluicegate sql --iceberg` (supervisor/lake/readers.py's JdbcCatalog settings)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def iceberg_sql(
    query: str, metadata_url: str, deep_storage: str | Path, jar_cache: Path
) -> subprocess.CompletedProcess[str]:
    """`sluicegate sql --iceberg QUERY -o json` on that metadata DB and deep storage."""
    env = {
        **os.environ,
        "SLUICEGATE_METADATA_URL": metadata_url,
        "SLUICEGATE_DEEP_STORAGE": str(deep_storage),
        "SLUICEGATE_JAR_CACHE": str(jar_cache),
    }
    return subprocess.run(
        [sys.executable, "-m", "supervisor.cli", "sql", "--iceberg", query, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env=env,
    )
