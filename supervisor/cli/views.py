"""The Spark side of `sluicegate sql` (and of supervisor.query): a view per datasource over
the files its Iceberg table holds, as the service's segments API lists them, or (`--iceberg`)
over the table itself, through the catalog in the metadata DB; `__time` is a timestamp
column."""

from __future__ import annotations

import atexit
import tempfile
from pathlib import Path
from typing import Any

from supervisor.cli.client import DEFAULT_URL, ServiceClient, credentials
from supervisor.lake.catalog import NAMESPACE
from supervisor.lake.tables import CATALOG
from tasks.storage import load_spec_uri, parse, read_parquet

METADATA = "/druid/coordinator/v1/metadata/datasources"


def published_files(url: str = DEFAULT_URL, user: str | None = None) -> dict[str, list[str]]:
    """The Parquet files of every datasource's used segments, from the service at `url`
    (logged in as `user`, or as the environment says)."""
    with ServiceClient(url, auth=credentials(user)) as client:
        return {
            datasource: [
                load_spec_uri(segment["loadSpec"])
                for segment in client.get(f"{METADATA}/{datasource}/segments", full="")
            ]
            for datasource in client.get(METADATA)
        }


def register_views(spark: Any, files: dict[str, list[str]]) -> list[str]:
    """A temporary view per datasource (segments with different columns are merged)."""
    for datasource, uris in files.items():
        # segments in S3 are read with the S3 settings of this environment (tasks/storage.py)
        s3 = [uri for uri in uris if uri.startswith("s3://")]
        storage = parse(s3[0].rsplit("/", 1)[0]) if s3 else None
        if storage is not None:
            frame = read_parquet(spark, storage, [storage.fs_path(uri) for uri in uris])
        else:
            frame = spark.read.option("mergeSchema", "true").parquet(*uris)
        frame.createOrReplaceTempView(f"`{datasource}`")
    return sorted(files)


def local_session(master: str = "local[*]", iceberg: bool = False) -> Any:
    """A Spark session for `sluicegate sql`; with `iceberg`, with Iceberg's runtime and the
    catalog `sluicegate` over the metadata DB and deep storage this machine's settings name
    (supervisor/lake/readers.py)."""
    from supervisor.cli.common import load_settings
    from supervisor.lake.readers import spark_catalog_conf
    from tasks.jars import iceberg_spark_bundle, jars
    from tasks.spark import scratch
    from tasks.spark.session import build_session

    settings = load_settings()
    conf = {"spark.ui.showConsoleProgress": "false"}  # no progress bars around the result
    if iceberg:
        conf |= spark_catalog_conf(settings.metadata_url, settings.storage())
        bundle = jars(iceberg_spark_bundle(), settings.jar_cache)
        conf["spark.jars"] = ",".join(str(jar) for jar in bundle)
    # Spark's scratch in a folder of this command's own, removed when it exits
    folder = scratch.claim(Path(tempfile.gettempdir()))
    atexit.register(scratch.release, folder)
    conf["spark.driver.extraJavaOptions"] = scratch.java_options(folder)
    return build_session(settings.jar_cache, master=master, app_name="sluicegate-sql", conf=conf)


def register_tables(spark: Any) -> list[str]:
    """A temporary view per datasource over its Iceberg table (`sluicegate.druid.<name>`)."""
    names = sorted(row[1] for row in spark.sql(f"SHOW TABLES IN {CATALOG}.{NAMESPACE}").collect())
    for name in names:
        spark.table(f"{CATALOG}.{NAMESPACE}.`{name}`").createOrReplaceTempView(f"`{name}`")
    return names
