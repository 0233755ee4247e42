"""What every function the tasks run in Spark's Python workers does first (`settle`).

Before each Spark task a reused Python worker calls importlib.invalidate_caches()
(pyspark.worker_util.setup_spark_files). The worker imports pyspark from pyspark.zip, so the
path importer cache holds a zipimporter for the archive and for each of its packages, and on
Python 3.11 a zipimporter's invalidate_caches reads the archive's directory again at once
(~3.5 ms for pyspark.zip's ~110 kB directory; Python 3.12 made it lazy). That was ~15 reads,
about 50 ms, per Spark task: a four-task job that does nothing took 0.30-0.40 s, 0.15-0.20 s
without them (a JVM-only job: 0.08 s). Here an archive is read again only when its size or
modification time changed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_read_at: dict[str, tuple[int, int]] = {}  # archive -> (mtime_ns, size) when last read


def settle() -> None:
    """Make this worker process's per-task cache invalidation cheap (once per process)."""
    import zipimport

    if sys.version_info >= (3, 12) or getattr(zipimport.zipimporter, "_sluicegate", False):
        return
    reread = zipimport.zipimporter.invalidate_caches
    cache: dict[str, Any] = zipimport._zip_directory_cache  # type: ignore[attr-defined]

    def invalidate_if_changed(self: Any) -> None:
        try:
            stat = os.stat(self.archive)
            stamp = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            stamp = None
        if stamp is not None and _read_at.get(self.archive) == stamp and self.archive in cache:
            self._files = cache[self.archive]
            return
        reread(self)
        if stamp is not None:
            _read_at[self.archive] = stamp

    zipimport.zipimporter.invalidate_caches = invalidate_if_changed  # type: ignore[method-assign]
    zipimport.zipimporter._sluicegate = True  # type: ignore[attr-defined]
