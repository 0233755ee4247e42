"""What the overlord and an indexing task say to each other: the task payload (Druid's
`index_kafka` task), task states, segment descriptors and the publish action."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from tasks.partitions import Offsets, offsets_from_json, offsets_json, parse_key
from tasks.spec.base import DruidModel
from tasks.spec.data_schema import DataSchema
from tasks.spec.errors import field_error
from tasks.spec.io_config import InputFormat
from tasks.spec.names import name_problem, task_id_problem
from tasks.spec.tuning_config import KafkaTuningConfig

END_OF_PARTITION = 2**63 - 1  # Druid's Long.MAX_VALUE: read until told where to end
# the task context key of the supervisor's offsets generation (how many resets it had)
OFFSETS_GENERATION = "offsetsGeneration"
TOKEN_HEADER = "X-Sluicegate-Task-Token"
# the leader lease epoch an overlord sends with each call to a task (tasks refuse commands
# from an epoch older than the newest they have seen)
EPOCH_HEADER = "X-Sluicegate-Leader-Epoch"
LEADER_HEADER = "X-Sluicegate-Leader-Url"  # and its URL: where the task publishes from then on
# a first/last aggregator's own column in a persist (the time of its value; the overlord's
# SQL API leaves it out of the held rows it reads)
TIME_SUFFIX = "__time_of"


class TaskState(StrEnum):
    """Where a task's own run is, as its control API's `status` answers (Druid's
    SeekableStreamIndexTaskRunner.Status, with the task's end)."""

    NOT_STARTED = "NOT_STARTED"
    STARTING = "STARTING"
    READING = "READING"
    PAUSED = "PAUSED"
    PUBLISHING = "PUBLISHING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"


class TaskStatusCode(StrEnum):
    """A task's status as the overlord records it (Druid's TaskState, the `statusCode` of its
    task API). A task's report names its end in these words too."""

    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"


class PublishOutcome(StrEnum):
    """How the overlord answered a publish (the segment transactional insert)."""

    PUBLISHED = "published"
    ALREADY_PUBLISHED = "alreadyPublished"  # a replica published this range first
    RETRY = "retry"  # the previous range is still publishing (or a race): ask again
    FAILED = "failed"

    @property
    def success(self) -> bool:
        return self in (PublishOutcome.PUBLISHED, PublishOutcome.ALREADY_PUBLISHED)


@dataclass(frozen=True)
class PublishResult:
    outcome: PublishOutcome
    reason: str = ""

    @property
    def success(self) -> bool:
        return self.outcome.success


class SequenceNumbers(DruidModel):
    """Druid's SeekableStream{Start,End}SequenceNumbers: per-partition Kafka offsets. The
    stream is the topic, or the topicPattern with "topic:partition" keys (tasks/partitions.py)."""

    type: Literal["start", "end"]
    stream: str = Field(min_length=1)
    partitionSequenceNumberMap: dict[str, int]

    @field_validator("partitionSequenceNumberMap")
    @classmethod
    def _offsets(cls, value: dict[str, int]) -> dict[str, int]:
        kinds = set()
        for partition, offset in value.items():
            try:
                kinds.add(type(parse_key(partition)))
            except ValueError as exc:
                raise field_error(partition, str(exc)) from None
            if offset < 0:
                raise field_error(partition, "offsets cannot be negative")
        if len(kinds) > 1:
            raise field_error("", "partition ids are all numbers or all 'topic:partition'")
        return value

    def offsets(self) -> Offsets:
        return offsets_from_json(self.partitionSequenceNumberMap)


class KafkaIndexTaskIOConfig(DruidModel):
    type: Literal["kafka"] = "kafka"
    taskGroupId: int | None = None
    baseSequenceName: str | None = None
    startSequenceNumbers: SequenceNumbers
    endSequenceNumbers: SequenceNumbers | None = None
    consumerProperties: dict[str, Any]
    pollTimeout: int = Field(default=100, gt=0)
    inputFormat: InputFormat
    minimumMessageTime: str | None = None
    maximumMessageTime: str | None = None

    @model_validator(mode="after")
    def _ranges(self) -> KafkaIndexTaskIOConfig:
        if not self.consumerProperties.get("bootstrap.servers"):
            raise field_error("consumerProperties.bootstrap.servers", "is required")
        start = self.startSequenceNumbers
        if not start.partitionSequenceNumberMap:
            raise field_error("startSequenceNumbers", "names no partition")
        end = self.endSequenceNumbers
        if end is None:
            return self
        if end.stream != start.stream:
            raise field_error("endSequenceNumbers.stream", "differs from startSequenceNumbers")
        if set(end.partitionSequenceNumberMap) != set(start.partitionSequenceNumberMap):
            raise field_error("endSequenceNumbers", "must name the same partitions as the start")
        for partition, offset in end.offsets().items():
            if offset < start.offsets()[partition]:
                raise field_error(
                    f"endSequenceNumbers.partitionSequenceNumberMap.{partition}",
                    "is before the start offset",
                )
        return self

    @property
    def topic(self) -> str:
        return self.startSequenceNumbers.stream

    def start_offsets(self) -> Offsets:
        return self.startSequenceNumbers.offsets()

    def end_offsets(self) -> Offsets:
        if self.endSequenceNumbers is None:
            return {p: END_OF_PARTITION for p in self.start_offsets()}
        return self.endSequenceNumbers.offsets()


def _refused_when(problem: Callable[[str], str | None]) -> AfterValidator:
    """A validator raising the problem `problem` finds in a value (none: the value)."""

    def check(value: str) -> str:
        found = problem(value)
        if found:
            raise ValueError(found)
        return value

    return AfterValidator(check)


TaskId = Annotated[str, Field(min_length=1, max_length=255), _refused_when(task_id_problem)]
Name = Annotated[str, _refused_when(name_problem)]  # a supervisor id or a dataSource


class IndexKafkaTask(DruidModel):
    """Druid's `index_kafka` task as it is submitted to /druid/indexer/v1/task."""

    type: Literal["index_kafka"]
    id: TaskId
    supervisorId: Name | None = None
    groupId: str | None = None
    dataSchema: DataSchema
    tuningConfig: KafkaTuningConfig = Field(default_factory=KafkaTuningConfig)
    ioConfig: KafkaIndexTaskIOConfig
    context: dict[str, Any] = Field(default_factory=dict)

    @property
    def datasource(self) -> str:
        return self.dataSchema.dataSource

    @property
    def supervisor_key(self) -> str:
        """Whose committed offsets this task moves: its supervisor, else its datasource."""
        return self.supervisorId or self.datasource

    @property
    def group_id(self) -> int | None:
        return self.ioConfig.taskGroupId


class CompactTask(DruidModel):
    """Druid's `compact` task as the leader's compaction duty issues it: one interval's files
    (`inputs`: segment id -> file) rewritten into files of at most maxRowsPerSegment rows on a
    task host's Spark, committed through the overlord as one replace (ReplaceAction)."""

    type: Literal["compact"]
    id: TaskId
    dataSource: Name
    interval: tuple[str, str]  # ISO start and end of the segment-granularity interval
    version: str = Field(min_length=1, max_length=100)
    inputs: dict[str, str] = Field(min_length=1)
    maxRowsPerSegment: int = Field(gt=0)
    dimensions: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)

    @property
    def datasource(self) -> str:
        return self.dataSource

    @property
    def supervisorId(self) -> None:
        return None

    @property
    def group_id(self) -> None:
        return None


AnyTask = IndexKafkaTask | CompactTask


def _task_type(value: Any) -> str | None:
    return value.get("type") if isinstance(value, dict) else getattr(value, "type", None)


# either kind of task, told apart by its type (a callable discriminator: DruidModel's
# validators run on every field, `type` too, which a field discriminator does not allow)
TaskPayload = Annotated[
    Annotated[IndexKafkaTask, Tag("index_kafka")] | Annotated[CompactTask, Tag("compact")],
    Discriminator(_task_type),
]


def parse_task(payload: object) -> AnyTask:
    """A task payload of either kind (ValidationError when it is neither: as an index_kafka
    task's, its errors' locations from the payload's top)."""
    if _task_type(payload) == "compact":
        return CompactTask.model_validate(payload)
    return IndexKafkaTask.model_validate(payload)


def parse_task_json(text: str | bytes) -> AnyTask:
    """parse_task of a JSON text (ValidationError also when it is not JSON)."""
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested too deep
        return IndexKafkaTask.model_validate_json(text)  # its error says where
    return parse_task(payload)


def range_digest(topic: str, start: Offsets, end: Offsets, generation: int = 0) -> str:
    """A short digest of an offset range: replicas of one range name their segments alike.
    `generation`: the supervisor's offsets generation (its task context's OFFSETS_GENERATION),
    so that the range read again after a reset names new segments (0: none, as before any)."""
    parts: list[Any] = [topic, offsets_json(start), offsets_json(end)]
    if generation:
        parts.append(generation)
    text = json.dumps(parts, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def offsets_generation(context: dict[str, Any]) -> int:
    """A task context's offsets generation (0 when absent, or not a count)."""
    found = context.get(OFFSETS_GENERATION)
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


class SegmentDescriptor(BaseModel):
    """A built segment, as the task reports it for publishing."""

    id: str
    dataSource: str
    intervalStart: str
    intervalEnd: str
    version: str
    partitionNum: int = Field(ge=0)
    path: str
    size: int = Field(ge=0)
    numRows: int = Field(ge=0)
    dimensions: list[str]
    metrics: list[str]


class PublishAction(BaseModel):
    """Segment transactional insert: the segments and the offset range, in one transaction."""

    type: Literal["segmentTransactionalInsert"] = "segmentTransactionalInsert"
    supervisorId: str
    dataSource: str
    segments: list[SegmentDescriptor]
    startMetadata: SequenceNumbers
    endMetadata: SequenceNumbers


class CheckpointAction(BaseModel):
    """A task asks for its sequence to be closed (Druid's CheckPointDataSourceMetadataAction):
    the overlord pauses the group's replicas, agrees on end offsets and sets them."""

    type: Literal["checkPointDataSourceMetadata"] = "checkPointDataSourceMetadata"
    supervisorId: str
    taskGroupId: int | None = None
    checkpointMetadata: SequenceNumbers


class ReplaceAction(BaseModel):
    """A compact task's commit (Druid's SegmentTransactionalReplaceAction): its segments
    replace the segments it read, in one snapshot, or nothing is committed."""

    type: Literal["segmentTransactionalReplace"] = "segmentTransactionalReplace"
    supervisorId: str  # the datasource (a compact task has no supervisor)
    dataSource: str
    replaced: dict[str, str]  # segment id -> file, as the task was given them
    segments: list[SegmentDescriptor]


class TaskActionRequest(BaseModel):
    task: str
    action: PublishAction | CheckpointAction | ReplaceAction = Field(discriminator="type")


class TaskCounters(BaseModel):
    """Druid's task metrics as totals: persists and handoffs with their seconds, pauses."""

    persists: int = 0
    fastPersists: int = 0  # written by the Python-worker engine (tasks/reading/engines/)
    directReads: int = 0  # of those, read by its own librdkafka consumers
    persistSeconds: float = 0.0
    handoffs: int = 0
    handoffSeconds: float = 0.0
    pauseSeconds: float = 0.0


class TaskMetrics(TaskCounters):
    """A task's GET /metrics: what a supervisor's pass asks every running task."""

    rowStats: dict[str, int] = Field(default_factory=dict)
    currentOffsets: dict[str, int] | None = None  # (a task of an earlier version: absent)


class TaskReport(BaseModel):
    """What a task leaves in its work directory's report.json when it ends."""

    status: TaskState
    errorMsg: str | None = None
    rowStats: dict[str, int] = Field(default_factory=dict)
    counters: TaskCounters = Field(default_factory=TaskCounters)
    unparseableEvents: list[dict[str, Any]] = Field(default_factory=list)
    segments: list[str] = Field(default_factory=list)
    replaced: dict[str, str] = Field(default_factory=dict)  # a compact task's: id -> file
    currentOffsets: dict[str, int] = Field(default_factory=dict)
    endOffsets: dict[str, int] = Field(default_factory=dict)
    skippedOffsets: list[dict[str, Any]] = Field(default_factory=list)
    readingSince: str | None = None
    firstReadAt: str | None = None
    firstPersistAt: str | None = None
    pausedAt: str | None = None


class _StoredIo(BaseModel):
    startSequenceNumbers: SequenceNumbers


class StoredTask(BaseModel):
    """What the overlord reads of a stored task payload (IndexKafkaTask.to_json()) on every
    pass and in every task list, without validating the whole task again: the same field
    names, so a renamed one fails here too."""

    ioConfig: _StoredIo
    context: dict[str, Any] = Field(default_factory=dict)

    def start_offsets(self) -> Offsets:
        return self.ioConfig.startSequenceNumbers.offsets()

    @property
    def identity(self) -> str:
        return str(self.context.get("identity", ""))

    @staticmethod
    def group_id(payload: dict[str, Any]) -> str | None:
        """Its groupId alone, read without validating the rest (a task list, up to 100,000
        rows, reads it of each)."""
        found = payload.get("groupId")
        return found if isinstance(found, str) else None
