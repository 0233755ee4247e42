"""SQLAlchemy 2 models of the metadata DB. The schema itself is made by the Alembic migrations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    Index,
    Integer,
    String,
    Text,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """Timestamps stored in UTC and always read back timezone-aware (SQLite keeps no zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; pass an aware one")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is not None:
            return value
        return value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        dict[str, Any]: JSON,
        datetime: UtcDateTime,
    }


class SupervisorSpecRow(Base):
    """Append-only history of specs; the newest row per supervisor wins, a tombstone ends it."""

    __tablename__ = "supervisor_specs"
    __table_args__ = (
        Index("ix_supervisor_specs_supervisor_id", "supervisor_id", "id"),
        Index("ux_supervisor_specs_parent", "supervisor_id", "parent_id", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    supervisor_id: Mapped[str] = mapped_column(String(255))
    # the version this one was decided on (0: none); once per supervisor, so two requests
    # that read the same version cannot both append after it
    parent_id: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    datasource: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime]
    tombstone: Mapped[bool] = mapped_column(Boolean, default=False)
    suspended: Mapped[bool] = mapped_column(Boolean, default=False)
    payload: Mapped[dict[str, Any]]


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        Index("ix_tasks_supervisor_status", "supervisor_id", "status"),
        Index("ix_tasks_datasource", "datasource"),
    )

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    type: Mapped[str] = mapped_column(String(64))
    supervisor_id: Mapped[str | None] = mapped_column(String(255))
    datasource: Mapped[str] = mapped_column(String(255))
    group_id: Mapped[int | None] = mapped_column(Integer)
    payload: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(32))
    error_msg: Mapped[str | None] = mapped_column(Text)
    location_host: Mapped[str | None] = mapped_column(String(255))
    location_port: Mapped[int | None] = mapped_column(Integer)
    location_scheme: Mapped[str | None] = mapped_column(String(8))  # None: http
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    token: Mapped[str | None] = mapped_column(String(64))
    log_path: Mapped[str | None] = mapped_column(Text)
    report: Mapped[dict[str, Any] | None]
    end_offsets: Mapped[dict[str, Any] | None]
    rolled_at: Mapped[datetime | None]
    worker: Mapped[str | None] = mapped_column(String(255))  # its task host; None: the overlord's


class WorkerRow(Base):
    """A task host (`sluicegate worker`), as its latest heartbeat described it."""

    __tablename__ = "workers"

    host: Mapped[str] = mapped_column(String(255), primary_key=True)  # host:port of its API
    scheme: Mapped[str] = mapped_column(String(8))
    ip: Mapped[str] = mapped_column(String(64))
    capacity: Mapped[int] = mapped_column(Integer)
    version: Mapped[str] = mapped_column(String(64))
    category: Mapped[str] = mapped_column(String(64))
    token: Mapped[str] = mapped_column(String(128))  # what the overlord calls its API with
    enabled: Mapped[bool] = mapped_column(Boolean)
    registered_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]

    def heard_within(self, timeout: timedelta, now: datetime) -> bool:
        """Whether its latest heartbeat came at most `timeout` before `now` (a host silent
        longer is lost, its tasks replaced)."""
        return now - self.heartbeat_at <= timeout


class AutoscalerRow(Base):
    """A supervisor's task count as its lag-based autoscaler set it, and the decisions that
    set it (newest last): the effective ioConfig.taskCount while the autoscaler is on."""

    __tablename__ = "autoscaler"

    supervisor_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    task_count: Mapped[int] = mapped_column(Integer)
    decisions: Mapped[dict[str, Any]]  # {"decisions": [{timestamp, from, to, reason}]}
    updated_at: Mapped[datetime]


class CommittedOffsetsRow(Base):
    """Where the next task of a datasource's supervisor starts: one row, swapped by version."""

    __tablename__ = "committed_offsets"

    supervisor_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    datasource: Mapped[str] = mapped_column(String(255))
    stream: Mapped[str] = mapped_column(String(255))
    offsets: Mapped[dict[str, Any]]
    version: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime]


class OffsetGenerationRow(Base):
    """How many times a supervisor's committed offsets were reset (reset, resetOffsets). Its
    tasks name their segments with it: a range read again after a reset is a new publish, not
    the one the same range made before (whose segments have the same range digest)."""

    __tablename__ = "offset_generations"

    supervisor_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime]


class SegmentRow(Base):
    __tablename__ = "segments"
    __table_args__ = (Index("ix_segments_datasource_used", "datasource", "used"),)

    id: Mapped[str] = mapped_column(String(512), primary_key=True)
    datasource: Mapped[str] = mapped_column(String(255))
    interval_start: Mapped[datetime]
    interval_end: Mapped[datetime]
    version: Mapped[str] = mapped_column(String(64))
    partition_num: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    num_rows: Mapped[int] = mapped_column(BigInteger)
    used: Mapped[bool] = mapped_column(Boolean, default=True)
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]
    # when it was last marked used or unused (None: used since its publish)
    used_status_last_updated: Mapped[datetime | None] = mapped_column(nullable=True)


class CompactionConfigRow(Base):
    """A datasource's compaction config (Druid's DataSourceCompactionConfig, as given), and
    whether its autocompact supervisor is suspended."""

    __tablename__ = "compaction_configs"

    datasource: Mapped[str] = mapped_column(String(255), primary_key=True)
    config: Mapped[dict[str, Any]]
    updated_at: Mapped[datetime]
    suspended: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class DynamicConfigRow(Base):
    """A cluster-wide config set at run time (Druid's dynamic configs), by name: `compaction`
    is the cluster's compaction config, as given."""

    __tablename__ = "dynamic_configs"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    config: Mapped[dict[str, Any]]
    updated_at: Mapped[datetime]


class RetentionRulesRow(Base):
    """A datasource's retention rules (Druid's load and drop rules), in order; `_default`
    holds the rules every datasource's own are followed by."""

    __tablename__ = "retention_rules"

    datasource: Mapped[str] = mapped_column(String(255), primary_key=True)
    rules: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    updated_at: Mapped[datetime]


class AuditRow(Base):
    """Who changed what: one row per change made through the API."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_key", "audit_key", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    audit_key: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    author: Mapped[str] = mapped_column(String(255))
    comment: Mapped[str] = mapped_column(Text)
    remote_address: Mapped[str | None] = mapped_column(String(255))
    payload: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]


class LeaderLeaseRow(Base):
    """The overlords' leader lease: one row, held by `holder` until `expires_at_s`, seconds on
    the metadata DB's own clock (no overlord's clock decides). Each new holder raises `epoch`."""

    __tablename__ = "leader_lease"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255))
    holder_url: Mapped[str] = mapped_column(String(255))
    epoch: Mapped[int] = mapped_column(BigInteger)
    expires_at_s: Mapped[float] = mapped_column(Float)
    acquired_at_s: Mapped[float] = mapped_column(Float)


class IntentRow(Base):
    """What a user or a task asked of a supervisor's tasks, until the leader's pass has done
    it: an early handoff, a reset's restart, a checkpoint, a task's shutdown. Written by the
    route in the same transaction as the change it goes with (with who asked), marked done in
    the same transaction as its effect, so a change of overlord loses none and repeats none.
    `owner`: the supervisor whose passes do it; "" for a task that has no supervisor."""

    __tablename__ = "intents"
    __table_args__ = (Index("ix_intents_pending", "done_at", "owner"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(32))
    task_id: Mapped[str | None] = mapped_column(String(255))
    payload: Mapped[dict[str, Any]]
    author: Mapped[str] = mapped_column(String(255))
    comment: Mapped[str] = mapped_column(Text)
    remote_address: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime]
    done_at: Mapped[datetime | None]
    outcome: Mapped[str | None] = mapped_column(Text)


class SupervisorStatusRow(Base):
    """Each supervisor's status as the leader's last pass left it (shared metadata DBs only):
    what a follower answers status, list and health with."""

    __tablename__ = "supervisor_status"

    supervisor_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    payload: Mapped[dict[str, Any]]
    epoch: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime]


class AuthnUserRow(Base):
    """A user who can log in (Druid's authenticator users): a PBKDF2 hash of the password,
    never the password; none until credentials are assigned."""

    __tablename__ = "authn_users"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    password_hash: Mapped[str | None] = mapped_column(String(255))  # base64
    salt: Mapped[str | None] = mapped_column(String(255))  # base64
    iterations: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime]


class ApiTokenRow(Base):
    """An API token of a user, by its SHA-256 (a token is 32 random bytes: nothing to
    stretch); shown once when it is made."""

    __tablename__ = "api_tokens"
    __table_args__ = (Index("ux_api_tokens_user_name", "user_name", "name", unique=True),)

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_name: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime]


class AuthzUserRow(Base):
    """A user roles are given to (Druid's authorizer users)."""

    __tablename__ = "authz_users"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)


class AuthzRoleRow(Base):
    """A role: its permissions, Druid's [{resource: {name: regex, type}, action}]."""

    __tablename__ = "authz_roles"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    permissions: Mapped[list[dict[str, Any]]] = mapped_column(JSON)


class AuthzUserRoleRow(Base):
    __tablename__ = "authz_user_roles"

    user_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    role_name: Mapped[str] = mapped_column(String(255), primary_key=True)


class IcebergTableRow(Base):
    """A table of the Iceberg catalog (Iceberg's JDBC catalog table, schema V1): where its
    current metadata file is. A commit swaps metadata_location by compare-and-swap."""

    __tablename__ = "iceberg_tables"

    catalog_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    table_namespace: Mapped[str] = mapped_column(String(255), primary_key=True)
    table_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    metadata_location: Mapped[str | None] = mapped_column(String(1000))
    previous_metadata_location: Mapped[str | None] = mapped_column(String(1000))
    iceberg_type: Mapped[str | None] = mapped_column(String(5))


class IcebergNamespacePropertyRow(Base):
    """A property of a namespace of the Iceberg catalog (Iceberg's JDBC catalog table)."""

    __tablename__ = "iceberg_namespace_properties"

    catalog_name: Mapped[str] = mapped_column(String(255), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(255), primary_key=True)
    property_key: Mapped[str] = mapped_column(String(255), primary_key=True)
    property_value: Mapped[str | None] = mapped_column(String(1000))
