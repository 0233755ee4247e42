"""The Kafka supervisor spec as Druid users write it, in either layout, validated and normalized."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from supervisor.lru import CACHE_BYTES, Lru, json_weight
from tasks.spec import legacy_parser
from tasks.spec.base import DruidModel
from tasks.spec.data_schema import DataSchema
from tasks.spec.errors import SpecError, field_error, from_validation_error
from tasks.spec.io_config import KafkaIOConfig
from tasks.spec.names import name_problem
from tasks.spec.tuning_config import KafkaTuningConfig

SUPPORTED_TYPES = ("kafka",)
STORED_SPECS_KEPT = 4096  # parsed stored spec versions kept (a few MB for a thousand)
_SECTIONS = ("dataSchema", "ioConfig", "tuningConfig")


class IngestionSpec(DruidModel):
    dataSchema: DataSchema
    ioConfig: KafkaIOConfig
    tuningConfig: KafkaTuningConfig = Field(default_factory=KafkaTuningConfig)

    @model_validator(mode="after")
    def _input_format(self) -> IngestionSpec:
        if self.ioConfig.inputFormat is None and self.dataSchema.parser is None:
            raise field_error("ioConfig.inputFormat", "is required (or a legacy dataSchema.parser)")
        return self


class SupervisorSpec(DruidModel):
    type: Literal["kafka"]
    id: str | None = None
    spec: IngestionSpec
    context: dict[str, Any] | None = None
    suspended: bool = False

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str | None) -> str | None:
        problem = None if value is None else name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @property
    def supervisor_id(self) -> str:
        return self.id or self.spec.dataSchema.dataSource

    @property
    def datasource(self) -> str:
        return self.spec.dataSchema.dataSource


def _normalize_layout(raw: dict[str, Any]) -> dict[str, Any]:
    """Move the legacy top-level dataSchema/ioConfig/tuningConfig under `spec`. With `spec`
    given, the top-level sections are Druid's read-back copies of it and are ignored, as Druid
    ignores them (a spec read, edited inside `spec` and sent back is the edited spec)."""
    legacy = {key: raw[key] for key in _SECTIONS if key in raw}
    if not legacy:
        return raw
    body = {key: value for key, value in raw.items() if key not in _SECTIONS}
    if "spec" not in raw:
        body["spec"] = legacy
    return body


def parse_supervisor_spec(raw: Any) -> SupervisorSpec:
    """Validate a submitted spec; raise SpecError naming every bad field."""
    if not isinstance(raw, dict):
        raise SpecError.single("", "the body must be a JSON object holding a supervisor spec")
    kind = raw.get("type")
    if kind is None:
        raise SpecError.single("type", "is required; Sluicegate runs supervisors of type 'kafka'")
    if kind not in SUPPORTED_TYPES:
        raise SpecError.single(
            "type", f"unsupported supervisor type '{kind}'; Sluicegate runs type 'kafka'"
        )
    body = _normalize_layout(raw)
    if isinstance(body.get("spec"), dict):
        section = body["spec"]
        schema, io = legacy_parser.translate(
            section.get("dataSchema"), section.get("ioConfig"), "spec."
        )
        if schema is not section.get("dataSchema"):
            body = {**body, "spec": {**section, "dataSchema": schema, "ioConfig": io}}
    try:
        return SupervisorSpec.model_validate(body)
    except ValidationError as exc:
        raise from_validation_error(exc) from None


_stored: Lru[int, tuple[dict[str, Any], SupervisorSpec]] = Lru(
    STORED_SPECS_KEPT, CACHE_BYTES, name="stored specs"
)


def stored_spec(version: int, payload: dict[str, Any]) -> SupervisorSpec:
    """The parsed spec of a stored version (its row id): stored versions never change, and a
    loop pass and a status request each needed one, so each version is validated once. A hit
    also compares the payload, so two metadata DBs in one process (tests) never mix theirs.
    Treat the result as read-only: it is shared."""
    hit = _stored.get(version)
    if hit is not None and (hit[0] is payload or hit[0] == payload):
        return hit[1]
    spec = parse_supervisor_spec(payload)
    _stored.put(version, (payload, spec), 6 * json_weight(payload))  # a parsed copy: ~6x
    return spec
