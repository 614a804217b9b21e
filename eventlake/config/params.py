"""A pipeline's own config section, ``pipelines.<name>``: the base model pipelines extend."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from eventlake.config.model import MaintenanceOverride, RestartSettings
from eventlake.durations import SparkInterval
from eventlake.errors import EventlakeError

#: How JSON is decoded: ``from_json`` given each record's bytes, Spark's ``from_json``, or
#: pyarrow in bulk with ``from_json`` for the records it does not claim (see
#: :func:`eventlake.transforms.parse_json`).
JsonDecoder = Literal["bytes", "spark", "arrow"]
#: The decoder of pipelines and transforms that name none.
DEFAULT_JSON_DECODER: JsonDecoder = "bytes"

#: 256 MiB: a 1M-event backlog of ~120-byte records is one batch; memory stays bounded.
AUTO_BATCH_BYTES = 256 * 1024 * 1024


class PipelineParams(BaseModel):
    """A pipeline's config section, ``pipelines.<name>``; subclass it to add keys.

    Unknown keys are rejected, so a typo in the YAML is an error naming the key.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str | None = Field(default=None, description="The input topic, for one input.")
    topics: dict[str, str] = Field(
        default_factory=dict, description="Input topics by role, for several inputs."
    )
    trigger: str = Field(default="10 seconds", description="Default trigger of every flow.")
    triggers: dict[str, str] = Field(
        default_factory=dict,
        description="Triggers by flow name, over `trigger` and the flow's own (a flow a "
        "latency depends on at '0 seconds', the others at a longer interval).",
    )
    max_offsets_per_trigger: Annotated[int, Field(ge=1)] | Literal["auto"] | None = Field(
        default="auto",
        description="Kafka records per batch at most: a number, 'auto' (sized from "
        "max_bytes_per_trigger and the topic's record size when the run starts) or null "
        "(no bound, EL-W103).",
    )
    min_partitions: Annotated[int, Field(ge=1)] | Literal["auto"] | None = Field(
        default=None,
        description="Spark tasks a Kafka batch is read in, at least (Spark's minPartitions): "
        "a number, 'auto' (a multiple of the cores that splits every partition evenly, when "
        "the partitions alone would leave cores idle) or null (a task per partition).",
    )
    max_bytes_per_trigger: int = Field(
        default=AUTO_BATCH_BYTES,
        ge=1024,
        description="The batch size 'auto' aims at, in bytes of Kafka keys and values.",
    )
    starting_offsets: str = Field(
        default="earliest",
        description="Where a new checkpoint starts: earliest, latest or Spark's JSON of "
        "offsets per partition.",
    )
    starting_timestamp: datetime | None = Field(
        default=None,
        description="Start a new checkpoint at the first record at or after this time "
        "(ISO 8601; no zone is UTC), in every partition; over starting_offsets.",
    )
    starting_offsets_by_timestamp: str | None = Field(
        default=None,
        description="Spark's JSON of epoch milliseconds per partition, "
        '{"topic": {"0": 1767225600000}}; over starting_offsets.',
    )
    starting_timestamp_strategy: Literal["error", "latest"] = Field(
        default="error",
        description="A partition with no record at or after the timestamp: fail the "
        "query (error) or start at its end (latest).",
    )
    fail_on_data_loss: bool = True
    data_loss_note: str | None = Field(
        default=None, description="Why fail_on_data_loss=false is acceptable here."
    )
    max_files_per_trigger: int | None = Field(default=None, ge=1)
    idle_timeout: SparkInterval | None = Field(
        default=None,
        description="When a flow's Kafka input has been caught up and quiet this long, its "
        "watermark follows the clock (now minus the delay), so windows and sessions close.",
    )

    #: This pipeline's restart strategy; unset, the top-level ``restart`` section's.
    restart: RestartSettings | None = None
    #: This pipeline's tables' maintenance, over the top-level ``maintenance`` section.
    maintenance: MaintenanceOverride | None = None

    json_decoder: JsonDecoder = Field(
        default=DEFAULT_JSON_DECODER,
        description="How the pipeline's transforms decode JSON records: bytes (from_json "
        "given each record's bytes, not a reader over them), spark (from_json itself) or "
        "arrow (pyarrow in bulk, from_json for what it does not claim). Each gives "
        "from_json's rows.",
    )

    @field_validator("trigger")
    @classmethod
    def _known_trigger(cls, value: str) -> str:
        return _checked_trigger(value)

    @field_validator("triggers")
    @classmethod
    def _known_triggers(cls, value: dict[str, str]) -> dict[str, str]:
        for flow, trigger in value.items():
            _checked_trigger(trigger, f"flow '{flow}': ")
        return value


def _checked_trigger(value: str, where: str = "") -> str:
    from eventlake.triggers import parse_trigger

    try:
        parse_trigger(value)
    except EventlakeError as exc:
        raise ValueError(where + exc.what) from None
    return value
