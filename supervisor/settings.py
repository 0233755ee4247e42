"""The one settings object. Every value can come from a `SLUICEGATE_*` environment variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tasks.spec.periods import parse_period
from tasks.storage import Storage, StorageError
from tasks.storage import parse as parse_storage


def default_jar_cache() -> Path:
    return Path.home() / ".cache" / "sluicegate" / "jars"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SLUICEGATE_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8090, ge=0, le=65535)
    metadata_url: str = "sqlite:///./var/sluicegate.db"
    # Where segments go: a directory (shared by every task host) or s3://bucket/prefix (the
    # endpoint from SLUICEGATE_S3_ENDPOINT, credentials from AWS_*; tasks/storage.py).
    deep_storage: str = "./var/segments"
    work_dir: Path = Path("./var/work")
    jar_cache: Path = Field(default_factory=default_jar_cache)
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    log_level: str = "info"
    log_format: Literal["text", "json"] = "text"  # json: one object a line
    # Spark master of indexing tasks (local[*], spark://host:7077, ...)
    task_master: str = "local[*]"
    # Where a host's tasks run: `shared`, one long-lived Spark application per host with each
    # task a thread of it (tasks/runtime/shared.py); `process`, a Spark driver process per task.
    task_runtime: Literal["shared", "process"] = "shared"
    # On a spark:// master, each task's application takes at most this many executor cores
    # (spark.cores.max; a standalone application takes every free core otherwise) and this
    # much memory per executor.
    task_cores: int = Field(default=1, ge=1, le=1024)
    task_executor_memory: str = Field(default="1g", pattern=r"^[1-9][0-9]{0,6}[kKmMgGtT]$")
    # The heap of a task application's driver JVM (Spark's spark.driver.memory): a host's
    # shared application, or each task's process with the process runtime.
    task_driver_memory: str = Field(default="1g", pattern=r"^[1-9][0-9]{0,6}[kKmMgGtT]$")
    # A host's shared application takes its whole heap at start (-Xms as -Xmx, every page
    # touched): its resident memory is then what it will be for its life, not a climb toward
    # the heap's bound over its first hour, as Druid's services are run (-Xms = -Xmx).
    # Off: the heap starts small and grows as the JVM sees fit.
    task_fixed_heap: bool = True
    # The task JVMs' glibc malloc arenas at most (MALLOC_ARENA_MAX, unless the environment sets
    # it; 0: glibc's own, eight a core). Each of a JVM's hundreds of threads that finds the
    # arenas busy may make one, and each keeps what is freed for reuse: at a 14-minute soak's
    # end the shared application's JVM was resident 25 MB past what it holds (its native
    # memory tracking's total), 9 MB with 4 (the bound Hadoop's YARN gives its containers).
    task_malloc_arenas: int = Field(default=4, ge=0, le=1024)
    # A task host (`sluicegate worker`) silent this long is lost: its tasks are recorded as
    # failed and replaced on other hosts.
    worker_timeout_s: float = Field(default=15.0, ge=2.0, le=3600.0)
    # How tasks reach this service; derived from host and port when unset.
    overlord_url: str | None = None
    # A host application or task process that no overlord (nor, on a task host, its agent
    # acting for one) has called for this long stops its tasks without publishing and exits
    # (tasks/runtime/orphan.py; 0: never). Well above a lease and a supervisor's period: a
    # leader probes its tasks every pass, and its runner lists them every few seconds.
    orphan_timeout_s: float = Field(default=600.0, ge=0, le=7 * 86400)
    # How often the leader applies the datasources' retention rules (Druid's
    # druid.coordinator.period).
    coordinator_period_s: float = Field(default=60.0, ge=0.5, le=86400)
    # compact tasks running at once, over every datasource (Druid's maxCompactionTaskSlots):
    # each takes a task slot and a share of its host's Spark
    max_compaction_tasks: int = Field(default=2, ge=1, le=1000)
    # Snapshots of a datasource's table older than this are expired (the current one, the
    # newest ten and each supervisor's newest publish are kept): how far time travel reaches.
    snapshot_retention: str = "PT1H"
    # Druid's automatic kill (druid.coordinator.kill.*): off by default. When on, every
    # kill_period_s the unused segments marked unused over kill_buffer_period ago whose
    # interval ended over kill_duration_to_retain ago (empty: any) are deleted for good.
    kill_on: bool = False
    kill_period_s: float = Field(default=86400.0, ge=1.0)
    kill_buffer_period: str = "P30D"
    kill_duration_to_retain: str = "P90D"
    # Files under a table's location that nothing names (a crashed publish's) are deleted once
    # they are this old (Iceberg's removeOrphanFiles; well past any publish's staging).
    orphan_file_age: str = "P1D"
    # How long the metadata DB keeps done intents, audit rows, and ended tasks (with their
    # work directories: logs, reports, payloads); spec history is kept for good.
    intent_retention: str = "P1D"
    audit_retention: str = "P90D"
    task_retention: str = "P7D"
    # How long the row of a task host not heard from is kept (one that left, or came back on
    # another port); a disabled host's row stays, so that its disabling outlives its absence.
    worker_retention: str = "P1D"
    # The shared task host application's log (<work>/host-app/app.log: its own lines, Spark's
    # and the JVM's) is cut past this many MiB, its lines moved to app.log.1 (the one before
    # dropped): at most twice this on disk, however long the application lives.
    app_log_max_mb: int = Field(default=64, ge=1, le=1024 * 1024)
    # How often the leader deletes what is past those retentions (and work directories).
    janitor_period_s: float = Field(default=300.0, ge=1.0, le=86400)
    # Kill running task processes when the service stops (tests); by default they keep running.
    kill_tasks_on_exit: bool = False
    # A task given its final end offsets raises its nice value (and its session's autogroup's)
    # by this much, so its successors' first batches go first on a busy machine (0: off). Off
    # by default: on a machine that stays saturated the publish can be starved for minutes.
    publish_niceness: int = Field(default=0, ge=0, le=19)
    # Run the supervisors' reconcile loops (off only for tests of the spec API alone).
    run_supervisors: bool = True
    # Passes of all supervisors that run at once, on a shared pool of threads (one thread per
    # supervisor does not scale; more than a few only slice the GIL finer). A pass stuck on a
    # slow task or broker for over a second gets a thread added in its place.
    supervisor_workers: int = Field(default=4, ge=1)
    # `serve` freezes what startup built and collects the youngest generation every this many
    # net allocations (Python's default is 700); see supervisor/heap.py.
    gc_young_threshold: int = Field(default=10_000, ge=100)
    # Diagnostics: every this many seconds `serve` logs where its Python allocations grew
    # most (tracemalloc; it costs CPU and memory). None: off.
    trace_allocations_s: float | None = Field(default=None, ge=10.0)
    # Diagnostics: every this many seconds `serve` logs its memory by where it is held (the C
    # allocator's, Python's, Arrow's; supervisor/heap.py `held`). None: off.
    memory_report_s: float | None = Field(default=None, ge=10.0)
    # Diagnostics: every this many memory reports (0: never), what holds the objects of the
    # types that grew most, found in a forked copy of `serve` (supervisor/heap.py `owners`).
    memory_owners_every: int = Field(default=0, ge=0)
    # Diagnostics: with memory_owners_every, these types too (by module and name, comma
    # separated, e.g. `pyiceberg.table.Table`), whether or not they grew most.
    memory_owners_of: str = Field(default="", max_length=2000, pattern=r"^[\w., ]*$")
    # `serve`'s C allocator (glibc): at most this many malloc arenas (0: glibc's own limit,
    # eight a core), and the free pages of every arena given back every this many seconds (0:
    # never). Without both its resident memory creeps up for hours (supervisor/heap.py).
    malloc_arenas: int = Field(default=2, ge=0, le=1024)
    malloc_trim_s: float = Field(default=60.0, ge=0, le=86400)
    # `serve`'s allocator of Python's objects: glibc's malloc, or Python's own (pymalloc, which
    # gives an arena back only once every object in it is freed, so each burst of work leaves a
    # higher floor). Read once, at start: `serve` starts itself again with PYTHONMALLOC set,
    # unless PYTHONMALLOC is set already (supervisor/allocator.py).
    python_allocator: Literal["malloc", "pymalloc"] = "malloc"
    # Druid's SQL API (/druid/v2/sql, supervisor/sql/): at most this many queries at once (the
    # next is answered 429), DuckDB's threads and memory for all of them together, a query's
    # timeout unless its context's `timeout` (ms) asks for less or more (up to the max), and
    # the most rows an answer may hold (more is a 400 asking for a LIMIT).
    sql_max_concurrent: int = Field(default=4, ge=1, le=256)
    sql_threads: int = Field(default=2, ge=1, le=256)
    sql_memory_mb: int = Field(default=1024, ge=64, le=1_048_576)
    sql_timeout_ms: int = Field(default=60_000, ge=100, le=86_400_000)
    sql_max_timeout_ms: int = Field(default=300_000, ge=100, le=86_400_000)
    sql_max_rows: int = Field(default=100_000, ge=1, le=100_000_000)
    sql_max_result_mb: int = Field(default=64, ge=1, le=65_536)
    # The SQL API reads the rows running tasks hold and have not published (one replica of
    # each task group asked, for at most this long; sql_live.py); off: published rows only.
    sql_live_rows: bool = True
    sql_live_timeout_ms: int = Field(default=2_000, ge=50, le=60_000)
    # the held files the SQL API keeps in memory once read, in MB (sql_held.py); 0: none
    sql_held_cache_mb: int = Field(default=256, ge=0, le=1_048_576)
    # fetch held files in task hosts' work directories from their tasks (Arrow, over the chat
    # API) even when this machine can read them (as it must when they are on another's disk)
    sql_held_over_chat: bool = False
    # The leader lease on the metadata DB: renewed every third of this; an overlord that dies
    # without giving it back holds up the next one this long at most.
    lease_s: float = Field(default=10.0, ge=1.0, le=300.0)
    # The Kafka consumer group mirroring a supervisor's committed offsets is this prefix and
    # its id (ioConfig.consumerGroupOffsets). Two deployments sharing a Kafka cluster give
    # each its own, so that neither writes, or deletes on reset, the other's group.
    consumer_group_prefix: str = Field(
        default="sluicegate-", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._-]+$"
    )

    # Authentication: "none" (every request may do everything; only on a loopback address
    # unless allow_unauthenticated) or "basic" (HTTP Basic and Bearer API tokens against the
    # users and roles in the metadata DB).
    auth: Literal["none", "basic"] = "none"
    allow_unauthenticated: bool = False
    # The first start with "basic" and no users creates `admin` with this password (else with
    # a generated one, shown once).
    admin_password: SecretStr | None = None
    # How long verified credentials and users' permissions are kept in memory.
    auth_cache_s: float = Field(default=30.0, ge=0, le=3600)
    # Names in Druid's basic-security paths (/druid-ext/basic-security/authentication/db/<name>)
    authenticator_name: str = "basic"
    authorizer_name: str = "basic"
    # TLS: the service (and its tasks' chat API) serve HTTPS with this certificate (chain) and
    # key, PEM files. Clients verify against the system's CAs or SSL_CERT_FILE.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    # Names a request may give as its Host besides loopback ones and the service's own
    # (comma-separated; "*": any). Guards against DNS rebinding.
    allowed_hosts: str = ""
    # Web origins (scheme://host:port, comma-separated) whose pages may call the API: CORS
    # answers for them, and their writes are let through. None by default.
    cors_origins: str = ""

    # Consumer properties that name files, libraries, commands, classes or URLs, which specs
    # may give (comma-separated names; "prefix*" for a family), and that the service's own
    # Kafka clients then use too. None by default: a spec cannot make the service act.
    allowed_consumer_properties: str = ""
    # Environment variables a spec's druid.dynamic.config.provider may name (a regular
    # expression over the whole name; none by default).
    spec_environment: str = ""
    # Where specs' schema registries and Protobuf descriptor files may be (URL or path
    # prefixes, comma-separated: "http://registry:8081/,/etc/sluicegate/protos/"). None by
    # default: an inputFormat cannot make the tasks fetch a URL or read a file.
    allowed_schema_locations: str = ""

    @field_validator(
        "snapshot_retention",
        "kill_buffer_period",
        "kill_duration_to_retain",
        "intent_retention",
        "audit_retention",
        "task_retention",
        "worker_retention",
        "orphan_file_age",
    )
    @classmethod
    def _period(cls, value: str, info: Any) -> str:
        if value == "" and info.field_name == "kill_duration_to_retain":
            return value
        try:
            parse_period(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("deep_storage", mode="before")
    @classmethod
    def _storage_location(cls, value: object) -> object:
        location = str(value) if isinstance(value, Path) else value
        if isinstance(location, str):
            try:
                parse_storage(location, {})
            except StorageError as exc:
                raise ValueError(str(exc)) from None
        return location

    def storage(self) -> Storage:
        """Deep storage, with the S3 settings of this environment."""
        return parse_storage(self.deep_storage)

    @model_validator(mode="after")
    def _tls_pair(self) -> Settings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key: give both or neither")
        return self

    @property
    def scheme(self) -> str:
        return "http" if self.tls_cert is None else "https"

    def advertised_url(self) -> str:
        if self.overlord_url:
            return self.overlord_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def prepare_dirs(self) -> None:
        """Create the local directories the service writes to, including a SQLite file's."""
        deep = self.storage()
        if not deep.is_s3:
            deep.check()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        prefix = "sqlite:///"
        if self.metadata_url.startswith(prefix) and ":memory:" not in self.metadata_url:
            Path(self.metadata_url[len(prefix) :]).parent.mkdir(parents=True, exist_ok=True)


def settings_problems(exc: ValueError) -> str:
    """What pydantic found wrong with the settings, in one line: each problem led by the
    setting and its environment variable (port (SLUICEGATE_PORT): ...; an option such as
    --port sets the same one), or by nothing for a rule over several settings (whose message
    names them)."""
    problems: list[Any] = getattr(exc, "errors", lambda: [])()
    said = []
    for problem in problems:
        message = str(problem.get("msg", problem)).removeprefix("Value error, ")
        where = ".".join(str(part) for part in problem.get("loc", ()))
        said.append(f"{where} (SLUICEGATE_{where.upper()}): {message}" if where else message)
    return "; ".join(said) or str(exc).splitlines()[0]
