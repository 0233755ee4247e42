"""How another engine finds the datasources' tables: Iceberg's JDBC catalog on the metadata DB.

`jdbc_url` turns the overlord's SQLAlchemy URL into the JDBC URL and credentials Iceberg's
`JdbcCatalog` takes; `spark_catalog_conf` is the Spark configuration of a catalog named
`sluicegate` over it (the README shows it; `sluicegate sql --iceberg` reads through it)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url

from supervisor.lake.catalog import catalog_properties
from supervisor.lake.tables import CATALOG
from tasks.storage import Storage


def jdbc_url(metadata_url: str) -> tuple[str, dict[str, str]]:
    """The JDBC URL of a SQLAlchemy one (SQLite or PostgreSQL), and its user and password."""
    url = make_url(metadata_url)
    if url.get_backend_name() == "sqlite":
        return f"jdbc:sqlite:{Path(url.database or '').resolve()}", {}
    if url.get_backend_name() != "postgresql":
        raise ValueError(f"no JDBC catalog for a {url.get_backend_name()} metadata DB")
    host = f"{url.host or 'localhost'}:{url.port or 5432}"
    credentials = {"user": url.username or "", "password": url.password or ""}
    return f"jdbc:postgresql://{host}/{url.database}", {k: v for k, v in credentials.items() if v}


def spark_catalog_conf(metadata_url: str, storage: Storage, name: str = CATALOG) -> dict[str, str]:
    """Spark settings of a catalog `name` (Iceberg's SparkCatalog over its JdbcCatalog) that
    reads the datasources' tables as `name`.druid.<datasource>."""
    uri, credentials = jdbc_url(metadata_url)
    prefix = f"spark.sql.catalog.{name}"
    conf = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": uri,
        f"{prefix}.jdbc.schema-version": "V1",
        f"{prefix}.warehouse": storage.location,
        **{f"{prefix}.jdbc.{key}": value for key, value in credentials.items()},
    }
    if storage.is_s3:  # Iceberg's S3FileIO: pyiceberg's s3.* keys, and its own region key
        conf[f"{prefix}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
        conf[f"{prefix}.s3.path-style-access"] = "true"
        conf[f"{prefix}.client.region"] = storage.region
        conf |= {f"{prefix}.{key}": value for key, value in catalog_properties(storage).items()}
    return conf
