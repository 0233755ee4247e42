"""Druid's Kafka ioConfig, with Druid's defaults."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

from tasks.spec.base import DruidModel, FixedPeriod, IsoDateTime, PositivePeriod
from tasks.spec.errors import field_error
from tasks.spec.names import topic_problem

# Bounds a supervisor's tasks stay within: more replicas than this protect nothing more, and a
# taskCount above the partitions a topic can have only leaves groups empty.
MAX_REPLICAS = 32
MAX_TASK_COUNT = 10_000

INPUT_FORMATS = {
    "json",
    "csv",
    "tsv",
    "delimited",
    "kafka",
    "regex",
    "avro_stream",
    "avro_ocf",
    "protobuf",
    "parquet",
    "orc",
    "kinesis",
    "javascript",
}


class InputFormat(DruidModel):
    type: str

    @model_validator(mode="after")
    def _known(self) -> InputFormat:
        extra = self.model_extra or {}
        if self.type not in INPUT_FORMATS:
            known = ", ".join(sorted(INPUT_FORMATS))
            raise field_error("type", f"unknown input format '{self.type}'; known: {known}")
        if (
            self.type in {"csv", "tsv", "delimited"}
            and not extra.get("columns")
            and not extra.get("findColumnsFromHeader")
        ):
            raise field_error("columns", f"a {self.type} input format needs its columns listed")
        if self.type == "kafka":
            value_format = extra.get("valueFormat")
            if not isinstance(value_format, dict):
                raise field_error("valueFormat", "the kafka input format needs a valueFormat")
            InputFormat.model_validate(value_format)
        return self


class AutoScalerConfig(DruidModel):
    enableTaskAutoScaler: bool = False
    autoScalerStrategy: Literal["lagBased", "costBased"] = "lagBased"
    taskCountMax: int | None = Field(default=None, ge=1)
    taskCountMin: int | None = Field(default=None, ge=1)
    taskCountStart: int | None = Field(default=None, ge=1)
    minTriggerScaleActionFrequencyMillis: int = Field(default=600_000, ge=0)
    lagCollectionIntervalMillis: int = Field(default=30_000, gt=0)
    lagCollectionRangeMillis: int = Field(default=600_000, gt=0)
    scaleOutThreshold: int = Field(default=6_000_000, ge=0)
    triggerScaleOutFractionThreshold: float = Field(default=0.3, ge=0, le=1)
    scaleInThreshold: int = Field(default=1_000_000, ge=0)
    triggerScaleInFractionThreshold: float = Field(default=0.9, ge=0, le=1)
    scaleActionStartDelayMillis: int = Field(default=300_000, ge=0)
    scaleActionPeriodMillis: int = Field(default=60_000, gt=0)
    scaleInStep: int = Field(default=1, ge=1)
    scaleOutStep: int = Field(default=2, ge=1)
    lagAggregate: Literal["SUM", "MAX", "AVERAGE"] = "SUM"
    stopTaskCountRatio: float | None = Field(default=None, gt=0, le=1)

    @model_validator(mode="after")
    def _bounds(self) -> AutoScalerConfig:
        if not self.enableTaskAutoScaler:
            return self
        if self.taskCountMax is None:
            raise field_error("taskCountMax", "is required when enableTaskAutoScaler is true")
        if self.taskCountMin is None:
            raise field_error("taskCountMin", "is required when enableTaskAutoScaler is true")
        if self.taskCountMin > self.taskCountMax:
            raise field_error("taskCountMin", "must not be greater than taskCountMax")
        start = self.taskCountStart
        if start is not None and not self.taskCountMin <= start <= self.taskCountMax:
            raise field_error("taskCountStart", "must lie between taskCountMin and taskCountMax")
        return self


class IdleConfig(DruidModel):
    enabled: bool = False
    inactiveAfterMillis: int | None = Field(default=None, gt=0)


class KafkaIOConfig(DruidModel):
    type: Literal["kafka"] = "kafka"
    topic: str | None = None
    topicPattern: str | None = None
    consumerProperties: dict[str, Any]
    pollTimeout: int = Field(default=100, gt=0)
    useEarliestOffset: bool = Field(
        default=False,
        validation_alias=AliasChoices("useEarliestOffset", "useEarliestSequenceNumber"),
    )
    inputFormat: InputFormat | None = None
    replicas: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    taskCount: int = Field(default=1, ge=1, le=MAX_TASK_COUNT)
    taskDuration: PositivePeriod = "PT1H"
    startDelay: FixedPeriod = "PT5S"
    period: PositivePeriod = "PT30S"
    completionTimeout: PositivePeriod = "PT30M"
    # Druid has it for Kinesis; here it also bounds how long tasks read a Kafka topic's old
    # partition set after partitions were added.
    repartitionTransitionDuration: PositivePeriod = "PT2M"
    lateMessageRejectionPeriod: PositivePeriod | None = None
    lateMessageRejectionStartDateTime: IsoDateTime | None = None
    earlyMessageRejectionPeriod: PositivePeriod | None = None
    autoScalerConfig: AutoScalerConfig | None = None
    idleConfig: IdleConfig | None = None
    stopTaskCount: int | None = Field(default=None, gt=0)
    emitTimeLagMetrics: bool = False
    configOverrides: dict[str, Any] | None = None
    lagAggregator: dict[str, Any] | None = None
    # Sluicegate's own: mirror the committed offsets to the consumer group <prefix><id>
    # (SLUICEGATE_CONSUMER_GROUP_PREFIX, sluicegate- by default)
    consumerGroupOffsets: bool = True

    @field_validator("consumerProperties")
    @classmethod
    def _bootstrap(cls, value: dict[str, Any]) -> dict[str, Any]:
        servers = value.get("bootstrap.servers")
        if not isinstance(servers, str) or not servers.strip():
            raise field_error("bootstrap.servers", "consumerProperties must hold bootstrap.servers")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KafkaIOConfig:
        if (self.topic is None) == (self.topicPattern is None):
            raise field_error("topic", "exactly one of topic and topicPattern must be set")
        problem = None if self.topic is None else topic_problem(self.topic)
        if problem:
            raise field_error("topic", problem)
        if self.topicPattern is not None:
            try:
                re.compile(self.topicPattern)
            except re.error as exc:
                raise field_error(
                    "topicPattern", f"is not a valid regular expression: {exc}"
                ) from None
        if self.lateMessageRejectionPeriod and self.lateMessageRejectionStartDateTime:
            raise field_error(
                "lateMessageRejectionStartDateTime",
                "cannot be combined with lateMessageRejectionPeriod",
            )
        return self
