"""What a flow's transform and its inputs/outputs see at run time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from eventlake.config import Settings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.api import PipelineParams

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

P = TypeVar("P", bound=PipelineParams)


@dataclass(frozen=True)
class FlowContext:
    """The session, the effective settings and the pipeline's typed params."""

    spark: SparkSession
    settings: Settings
    pipeline: str
    flow: str
    params: PipelineParams
    #: Where tables are read and written; the config's lake root, except under `validate`.
    lake_root: Path
    #: The flow's further inputs by role, as streaming DataFrames.
    streams: Mapping[str, DataFrame] = field(default_factory=dict)

    def table_path(self, layer: str, table: str) -> Path:
        return (self.lake_root / layer / table).absolute()

    @property
    def checkpoint(self) -> Path:
        return self.settings.checkpoints.for_flow(self.pipeline, self.flow).absolute()

    def typed(self, kind: type[P]) -> P:
        """The params as the pipeline's own model, for typed access in transforms."""
        if not isinstance(self.params, kind):
            raise TypeError(f"params of {self.pipeline} are {type(self.params).__name__}")
        return self.params

    def topic(self, role: str | None = None) -> str:
        """The input topic (``pipelines.<p>.topic``) or one by role (``.topics.<role>``)."""
        name = self.params.topics.get(role) if role else self.params.topic
        if not name:
            key = f"pipelines.{self.pipeline}." + (f"topics.{role}" if role else "topic")
            raise EventlakeError(
                ErrorCode.CONFIG_INVALID_VALUE,
                f"flow '{self.pipeline}.{self.flow}' reads Kafka, but {key} is not set.",
                expected="the name of the topic to read",
                fix=f"set it in eventlake.yaml or with --set {key}=TOPIC",
            )
        return name

    def stream(self, role: str) -> DataFrame:
        """The further input ``role`` declared with ``@flow(inputs={role: ...})``."""
        try:
            return self.streams[role]
        except KeyError:
            known = ", ".join(sorted(self.streams)) or "none"
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"flow '{self.pipeline}.{self.flow}' reads input '{role}', which it does "
                f"not declare (declared: {known}).",
                fix=f"declare it: @pipeline.flow(..., inputs={{'{role}': ...}})",
            ) from None

    def with_watermark(self, df: DataFrame, column: str, delay: str) -> DataFrame:
        """``df.withWatermark(column, delay)``: the place late-data tolerance is declared."""
        return df.withWatermark(column, delay)
