"""What every function the tasks run in Spark's Python workers does first (`settle`).

1. Before each Spark task a reused Python worker calls importlib.invalidate_caches()
(pyspark.worker_util.setup_spark_files). The worker imports pyspark from pyspark.zip, so the
path importer cache holds a zipimporter for the archive and for each of its packages, and on
Python 3.11 a zipimporter's invalidate_caches reads the archive's directory again at once
(~3.5 ms for pyspark.zip's ~110 kB directory; Python 3.12 made it lazy). That was ~15 reads,
about 50 ms, per Spark task: a four-task job that does nothing took 0.30-0.40 s, 0.15-0.20 s
without them (a JVM-only job: 0.08 s). Here an archive is read again only when its size or
modification time changed.

2. After each Spark task a reused Python worker runs a full garbage collection
(pyspark.daemon: `gc.collect()`), which walks every object of the process: with the modules of
the batches loaded (pyarrow and its pandas shim, confluent_kafka, orjson) ~90,000 objects,
~40 ms a task. A combined job is a few Spark tasks and a hundred quiet tasks run several such
jobs a second: at 100 tasks of bench/density.py, 85% of the workers' CPU time (about a core of
two) went to these collections. Here the worker loads those modules once, collects, and
freezes what is alive then (gc.freeze: the collector leaves it alone from then on; objects are
still freed when their last reference goes); each later collection walks only what the tasks
made since, well under a millisecond.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import Any

_read_at: dict[str, tuple[int, int]] = {}  # archive -> (mtime_ns, size) when last read
# what the batches' functions import in the workers: loaded, then frozen, once per process
MODULES = (
    "confluent_kafka",  # the direct reads' librdkafka (~0.3 s to import)
    "orjson",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.fs",
    "pyarrow.parquet",
    "tasks.reading.combiner",
    "tasks.reading.direct_read",
    "tasks.reading.worker_batch",
    "tasks.output.segments",
)
_frozen = False


def settle() -> None:
    """Make this worker process's per-task cache invalidation and garbage collection cheap
    (the first call in a process does the work)."""
    _cheap_invalidation()
    _freeze_loaded()


def _freeze_loaded() -> None:
    global _frozen
    if _frozen:
        return
    _frozen = True
    for name in MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            # a worker without confluent_kafka gives its reads to the Kafka source (direct_read)
            if name != "confluent_kafka":
                raise
    import pyarrow

    # pyarrow's first array from Python values imports its pandas shim (~0.5 s)
    pyarrow.array([b""], pyarrow.binary())
    gc.collect()  # garbage is not frozen
    gc.freeze()


def _cheap_invalidation() -> None:
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
