"""Deep storage: where persists and segments are written, a local directory or an S3 bucket
(`s3://bucket/prefix`), through Arrow's file systems. A `Storage` is a small value that
pickles: Spark's Python workers on any executor rebuild its file system from it.

S3: the endpoint comes from SLUICEGATE_S3_ENDPOINT (none: AWS itself), the credentials from
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), the region from
AWS_REGION / AWS_DEFAULT_REGION (default us-east-1). They are read where the Storage is made
(the task's driver) and travel with it to the executors, which need no settings of their own.
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

S3_ENDPOINT = "SLUICEGATE_S3_ENDPOINT"


class StorageError(RuntimeError):
    """Deep storage cannot be used: a bad location, a missing bucket, refused credentials."""


@dataclass(frozen=True)
class Storage:
    """A local root directory (`bucket` empty) or a bucket and key prefix on an S3 endpoint."""

    root: str  # local: an absolute directory; S3: the key prefix ("" for the bucket's root)
    bucket: str = ""
    endpoint: str = ""
    region: str = "us-east-1"
    access_key: str = field(default="", repr=False)
    secret_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)

    @property
    def is_s3(self) -> bool:
        return bool(self.bucket)

    @property
    def location(self) -> str:
        """As the operator gives it: an absolute directory or s3://bucket/prefix."""
        if not self.is_s3:
            return self.root
        return f"s3://{self.bucket}/{self.root}".rstrip("/")

    def path(self, *parts: str) -> str:
        """The file system path of a file or directory below the root."""
        base = f"{self.bucket}/{self.root}".rstrip("/") if self.is_s3 else self.root
        return "/".join([base, *[p.strip("/") for p in parts if p]])

    def fs_path(self, uri: str) -> str:
        """The file system path of what `uri` gave (the inverse of uri)."""
        return uri.removeprefix("s3://") if self.is_s3 else uri

    def uri(self, path: str) -> str:
        """What a user or another reader is given for a path: s3://bucket/key, or the path."""
        return f"s3://{path}" if self.is_s3 else path

    def filesystem(self) -> Any:
        import pyarrow.fs as pafs

        if not self.is_s3:
            return pafs.LocalFileSystem()
        return _s3(self.endpoint, self.region, self.access_key, self.secret_key, self.session_token)

    # What the tasks do with it --------------------------------------------------------------

    def make_dirs(self, path: str) -> None:
        if not self.is_s3:  # S3 has no directories: a key's prefix is enough
            Path(path).mkdir(parents=True, exist_ok=True)

    def files(self, directory: str, suffix: str = ".parquet") -> list[str]:
        """The files directly in `directory` with the suffix, sorted; none if it is missing."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(directory, allow_not_found=True)
        infos = self.filesystem().get_file_info(selector)
        return sorted(
            info.path
            for info in infos
            if info.type == pafs.FileType.File and info.base_name.endswith(suffix)
        )

    def dirs(self, directory: str) -> list[str]:
        """The names of the directories directly in `directory` (S3: its common prefixes)."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(directory, allow_not_found=True)
        infos = self.filesystem().get_file_info(selector)
        return sorted(info.base_name for info in infos if info.type == pafs.FileType.Directory)

    def size(self, path: str) -> int:
        return int(self.filesystem().get_file_info(path).size or 0)

    def delete_dir(self, directory: str) -> None:
        """Remove a directory and what is below it; nothing if it is missing."""
        import pyarrow.fs as pafs

        fs = self.filesystem()
        if fs.get_file_info(directory).type != pafs.FileType.NotFound or self.is_s3:
            with contextlib.suppress(FileNotFoundError):
                fs.delete_dir(directory)

    def check(self) -> None:
        """Prove the location usable before anything is written: a local directory is made; an
        S3 bucket must exist and take the credentials (a probe object is written, read back
        and deleted). Raises StorageError with one line saying what is wrong."""
        if not self.is_s3:
            try:
                Path(self.root).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"deep storage {self.root}: {exc.strerror or exc}") from None
            return
        import pyarrow.fs as pafs

        fs = self.filesystem()
        try:
            if fs.get_file_info(self.bucket).type == pafs.FileType.NotFound:
                raise StorageError(f"deep storage {self.location}: bucket {self.bucket} not found")
            probe = self.path("_sluicegate_probe")
            with fs.open_output_stream(probe) as out:
                out.write(b"ok")
            with fs.open_input_stream(probe) as back:
                back.read()
            fs.delete_file(probe)
        except StorageError:
            raise
        except OSError as exc:
            raise StorageError(f"deep storage {self.location}: {_first_line(exc)}") from None


@functools.lru_cache(maxsize=8)
def _s3(endpoint: str, region: str, access: str, secret: str, token: str) -> Any:
    import pyarrow.fs as pafs

    options: dict[str, Any] = {
        "region": region,
        "allow_bucket_creation": False,
        "allow_bucket_deletion": False,
        "connect_timeout": 5,
        "request_timeout": 60,
    }
    if access:
        options.update(access_key=access, secret_key=secret)
        if token:
            options["session_token"] = token
    if endpoint:
        parsed = urlparse(endpoint)
        options["endpoint_override"] = parsed.netloc or parsed.path
        options["scheme"] = parsed.scheme or "https"
        options["force_virtual_addressing"] = False
    return pafs.S3FileSystem(**options)


def parse(location: str | Path, environ: dict[str, str] | None = None) -> Storage:
    """A Storage from what the operator gives (a directory, or s3://bucket[/prefix]) and, for
    S3, the environment's endpoint, region and credentials."""
    text = str(location)
    if not text.startswith("s3://"):
        if "://" in text:
            raise StorageError(f"deep storage {text}: only a directory or s3://bucket/prefix")
        return Storage(root=str(Path(text).resolve()))
    env = os.environ if environ is None else environ
    bucket, _, prefix = text.removeprefix("s3://").partition("/")
    if not bucket:
        raise StorageError(f"deep storage {text}: no bucket (s3://bucket/prefix)")
    endpoint = env.get(S3_ENDPOINT, "")
    if endpoint and urlparse(endpoint).scheme not in ("http", "https"):
        raise StorageError(f"{S3_ENDPOINT}={endpoint}: an http:// or https:// URL")
    return Storage(
        root=prefix.strip("/"),
        bucket=bucket,
        endpoint=endpoint,
        region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
        access_key=env.get("AWS_ACCESS_KEY_ID", ""),
        secret_key=env.get("AWS_SECRET_ACCESS_KEY", ""),
        session_token=env.get("AWS_SESSION_TOKEN", ""),
    )


def load_spec(uri: str) -> dict[str, str]:
    """Druid's loadSpec of a segment file (its path, or s3://bucket/key): local or S3's."""
    if not uri.startswith("s3://"):
        return {"type": "local", "path": uri}
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return {"type": "s3_zip", "bucket": bucket, "key": key, "S3Schema": "s3n"}


def load_spec_uri(spec: dict[str, object]) -> str:
    """The file a loadSpec names (the inverse of load_spec)."""
    if spec.get("type") == "s3_zip":
        return f"s3://{spec.get('bucket')}/{spec.get('key')}"
    return str(spec.get("path"))


LOCAL = Storage(root="/")  # local absolute paths, wherever they are


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# Spark over S3 without Hadoop's S3 connector: Python workers read and write the files with
# Arrow, so a cluster needs no extra jars (hadoop-aws and the AWS SDK bundle are ~600 MB).


def parquet_files(storage: Storage, paths: list[str]) -> list[str]:
    """Each path's Parquet files: a file is itself, a directory its files."""
    files: list[str] = []
    for path in paths:
        files.extend([path] if path.endswith(".parquet") else storage.files(path))
    return files


def read_parquet(spark: Any, storage: Storage, paths: list[str]) -> Any:
    """A DataFrame over Parquet files or directories of them, their schemas merged (Spark's
    mergeSchema). Local paths: Spark's own reader. S3: one Spark task per file or so, each
    reading with Arrow."""
    if not storage.is_s3:
        return spark.read.option("mergeSchema", "true").parquet(*paths)
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    files = parquet_files(storage, paths)
    if not files:
        raise StorageError(f"no Parquet files in {', '.join(storage.uri(p) for p in paths)}")
    fs = storage.filesystem()
    merged = pa.unify_schemas(
        [pq.read_schema(path, filesystem=fs) for path in files], promote_options="permissive"
    )
    schema = from_arrow_schema(merged.remove_metadata())
    target = to_arrow_schema(schema)
    names = list(schema.names)
    # mapInArrow resolves columns by unquoted name, so dotted names travel positionally
    positional = StructType(
        [StructField(f"c{i}", field.dataType, True) for i, field in enumerate(schema)]
    )

    def read(batches: Any) -> Any:
        reader_fs = storage.filesystem()
        for batch in batches:
            for index in batch.column(0).to_pylist():
                table = pq.ParquetFile(files[index], filesystem=reader_fs).read()
                columns = [
                    table[name].cast(field.type)
                    if name in table.column_names
                    else pa.nulls(table.num_rows, field.type)
                    for name, field in zip(names, target, strict=True)
                ]
                out = pa.Table.from_arrays(columns, [f"c{i}" for i in range(len(names))])
                yield from out.to_batches()

    jobs = spark.range(0, len(files), 1, min(len(files), 64))
    return jobs.mapInArrow(read, positional).toDF(*names)


def write_parquet(frame: Any, storage: Storage, directory: str) -> None:
    """Write a DataFrame as Parquet files into `directory`, replacing what was there (Spark's
    overwrite). S3: each Spark partition writes its file with Arrow."""
    if not storage.is_s3:
        frame.write.mode("overwrite").parquet(directory)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    storage.delete_dir(directory)
    names = list(frame.columns)
    schema = to_arrow_schema(frame.schema)

    def write(batches: Any) -> Any:
        from pyspark import TaskContext

        context = TaskContext.get()
        part = 0 if context is None else context.partitionId()
        path = f"{directory}/part-{part:05d}.parquet"
        writer = None
        for batch in batches:
            table = pa.Table.from_batches([batch]).rename_columns(names).cast(schema)
            if writer is None:
                writer = pq.ParquetWriter(
                    path, schema, compression="snappy", filesystem=storage.filesystem()
                )
            writer.write_table(table)
        if writer is not None:
            writer.close()
            yield pa.RecordBatch.from_pydict({"path": [path]})

    renamed = frame.toDF(*[f"c{i}" for i in range(len(names))])
    if not renamed.mapInArrow(write, "path string").collect():
        # no rows: one empty file, so a reader still finds the schema (as Spark's writer does)
        pq.write_table(
            schema.empty_table(),
            f"{directory}/part-00000.parquet",
            filesystem=storage.filesystem(),
        )
