"""The Spark side of `sluicegate sql` (and of supervisor.query): a view per datasource over
its published, used segments, as the service lists them, with `__time` a timestamp column."""

from __future__ import annotations

from typing import Any

from supervisor.cli.client import DEFAULT_URL, ServiceClient, credentials
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


def local_session(master: str = "local[*]") -> Any:
    from supervisor.cli.common import load_settings
    from tasks.spark.session import build_session

    return build_session(
        load_settings().jar_cache,
        master=master,
        app_name="sluicegate-sql",
        conf={"spark.ui.showConsoleProgress": "false"},  # no progress bars around the result
    )
