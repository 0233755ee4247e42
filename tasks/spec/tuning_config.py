"""Druid's Kafka tuningConfig, with Druid's defaults."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from tasks.spec.base import DruidModel, LongPeriod, PositivePeriod

INT_MAX = 2_147_483_647
DEFAULT_MAX_TOTAL_ROWS = 20_000_000


class KafkaTuningConfig(DruidModel):
    type: Literal["kafka"] = "kafka"
    maxRowsInMemory: int = Field(default=150_000, gt=0)
    maxBytesInMemory: int = Field(default=0, ge=-1)
    skipBytesInMemoryOverheadCheck: bool = False
    maxRowsPerSegment: int = Field(default=5_000_000, gt=0)
    # None: Druid's default (DEFAULT_MAX_TOTAL_ROWS), written as null as Druid writes it
    maxTotalRows: int | None = Field(default=None, gt=0)
    intermediatePersistPeriod: PositivePeriod = "PT10M"
    intermediateHandoffPeriod: LongPeriod = f"P{INT_MAX}D"
    maxPendingPersists: int = Field(default=0, ge=0)
    indexSpec: dict[str, Any] = Field(default_factory=dict)
    indexSpecForIntermediatePersists: dict[str, Any] = Field(default_factory=dict)
    reportParseExceptions: bool = False
    handoffConditionTimeout: int = Field(default=900_000, ge=0)
    resetOffsetAutomatically: bool = False
    skipSequenceNumberAvailabilityCheck: bool = False
    workerThreads: int | None = Field(default=None, gt=0)
    chatRetries: int = Field(default=8, ge=0)
    httpTimeout: PositivePeriod = "PT10S"
    shutdownTimeout: PositivePeriod = "PT80S"
    offsetFetchPeriod: PositivePeriod = "PT30S"
    repartitionTransitionDuration: PositivePeriod = "PT2M"
    logParseExceptions: bool = False
    maxParseExceptions: int = Field(default=INT_MAX, ge=0)
    maxSavedParseExceptions: int = Field(default=0, ge=0)
    segmentWriteOutMediumFactory: dict[str, Any] | None = None
    numPersistThreads: int = Field(default=1, ge=1)
    maxColumnsToMerge: int = -1
    releaseLocksOnHandoff: bool = False
    appendableIndexSpec: dict[str, Any] = Field(default_factory=lambda: {"type": "onheap"})

    @model_validator(mode="after")
    def _parse_exceptions(self) -> KafkaTuningConfig:
        if self.reportParseExceptions:
            # Druid: reportParseExceptions=true means fail on the first unparseable row.
            self.maxParseExceptions = 0
            self.maxSavedParseExceptions = min(1, self.maxSavedParseExceptions)
        return self
