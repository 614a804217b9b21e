"""What a flow sees: its resolved config (no Spark) and, while it runs, its runtime context.

:class:`FlowConfig` is everything config decides for one flow (its params, parsed once;
its topics, table paths, checkpoint); commands that never start Spark (``list``,
pre-flight topic checks) use it alone. :class:`FlowContext` adds the session and the
flow's further input streams; a flow's transform receives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from eventlake.config import Settings
from eventlake.config.params import PipelineParams
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.scope import RunScope
from eventlake.storage import Location
from eventlake.triggers import is_micro_batch
from eventlake.watermarks import WatermarkRecorder

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

P = TypeVar("P", bound=PipelineParams)


class Source(Protocol):
    """What a flow context needs of an input (``eventlake.connectors.Input``)."""

    def topics(self, flow: FlowConfig) -> list[str]: ...

    def describe(self, flow: FlowConfig | None = None) -> str: ...


@dataclass(frozen=True, kw_only=True)
class FlowConfig:
    """One flow's settings: the pipeline's typed params, topics, tables and checkpoint."""

    pipeline: str
    flow: str
    settings: Settings
    params: PipelineParams
    #: Where tables are read and written; the config's lake root, except under `validate`.
    lake_root: Location

    @property
    def query_name(self) -> str:
        """``<pipeline>.<flow>``: the streaming query's name, in progress lines and errors."""
        return f"{self.pipeline}.{self.flow}"

    def table_path(self, layer: str, table: str) -> Location:
        return self.lake_root / layer / table

    def under_lake(self, path: str) -> Location:
        """``path`` itself when absolute or a URI, else under the lake root."""
        return (
            Location(path) if Path(path).is_absolute() or "://" in path else self.lake_root / path
        )

    @property
    def checkpoint(self) -> Location:
        return self.settings.checkpoints.for_flow(self.pipeline, self.flow)

    def typed(self, kind: type[P]) -> P:
        """The params as the pipeline's own model, for typed access in transforms."""
        if not isinstance(self.params, kind):
            raise TypeError(f"params of {self.pipeline} are {type(self.params).__name__}")
        return self.params

    def param(self, key: str) -> str:
        """The text value of ``pipelines.<p>.<key>``; EL-CONFIG-004 when it is not set."""
        value = getattr(self.params, key, None)
        if value is None or value == "":
            name = f"pipelines.{self.pipeline}.{key}"
            raise EventlakeError(
                ErrorCode.CONFIG_INVALID_VALUE,
                f"flow '{self.query_name}' needs {name}, which is not set.",
                expected=f"{name} in the pipeline's params",
                fix=f"set it in eventlake.yaml or with --set {name}=VALUE",
            )
        return str(value)

    def topic(self, role: str | None = None) -> str:
        """The input topic (``pipelines.<p>.topic``) or one by role (``.topics.<role>``)."""
        name = self.params.topics.get(role) if role else self.params.topic
        if not name:
            key = f"pipelines.{self.pipeline}." + (f"topics.{role}" if role else "topic")
            raise EventlakeError(
                ErrorCode.CONFIG_INVALID_VALUE,
                f"flow '{self.query_name}' reads Kafka, but {key} is not set.",
                expected="the name of the topic to read",
                fix=f"set it in eventlake.yaml or with --set {key}=TOPIC",
            )
        return name


@dataclass(frozen=True, kw_only=True)
class FlowContext(FlowConfig):
    """A flow's config plus the session and its further input streams, while it runs."""

    spark: SparkSession
    #: The flow's further inputs by role, as streaming DataFrames.
    streams: Mapping[str, DataFrame] = field(default_factory=dict)
    #: The trigger the flow runs with (inputs set options some triggers refuse).
    trigger: str = ""
    #: The flow's inputs (the main one first), as declared.
    sources: tuple[Source, ...] = ()
    #: The run the flow belongs to: its services and what its outputs hold open.
    run: RunScope = field(default_factory=RunScope, compare=False)
    #: The watermarks this build of the transform declares (one recorder per context).
    watermarks: WatermarkRecorder = field(default_factory=WatermarkRecorder, compare=False)

    @classmethod
    def of(
        cls,
        config: FlowConfig,
        spark: SparkSession,
        streams: Mapping[str, DataFrame] | None = None,
        trigger: str = "",
        sources: tuple[Source, ...] = (),
        run: RunScope | None = None,
        watermarks: WatermarkRecorder | None = None,
    ) -> FlowContext:
        """A context for ``config``; ``run`` defaults to the run of ``config`` when that
        is a context already, else a run of its own (a plan that never runs). Each context
        records its own watermarks (``watermarks``, else a new recorder)."""
        given = {f.name: getattr(config, f.name) for f in fields(FlowConfig)}
        if run is None:
            run = config.run if isinstance(config, FlowContext) else RunScope()
        return cls(**given, spark=spark, streams=dict(streams or {}), trigger=trigger,
                   sources=sources, run=run,
                   watermarks=watermarks or WatermarkRecorder())  # fmt: skip

    def stream(self, role: str) -> DataFrame:
        """The further input ``role`` declared with ``@flow(inputs={role: ...})``."""
        try:
            return self.streams[role]
        except KeyError:
            known = ", ".join(sorted(self.streams)) or "none"
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"flow '{self.query_name}' reads input '{role}', which it does "
                f"not declare (declared: {known}).",
                fix=f"declare it: @pipeline.flow(..., inputs={{'{role}': ...}})",
            ) from None

    def with_watermark(self, df: DataFrame, column: str, delay: str) -> DataFrame:
        """``df.withWatermark(column, delay)``: the place late-data tolerance is declared.

        With ``pipelines.<p>.idle_timeout`` and a micro-batch trigger, the watermark
        also follows the clock while the flow's Kafka input is caught up and quiet
        (:mod:`eventlake.transforms.heartbeat`). The watermark, and the grouping of the
        frame returned, are recorded (:attr:`watermarks`): late rows, ``verify`` and the
        lateness report judge by them.
        """
        return self.watermarks.watermark(
            df, column, delay, lambda before: self._watermarked(before, column, delay)
        )

    def _watermarked(self, df: DataFrame, column: str, delay: str) -> DataFrame:
        timeout = self.params.idle_timeout
        # Every micro-batch trigger gets the heartbeats (an available-now run resumes the
        # checkpoint of an interval run): the query's sources never change with the trigger.
        if timeout is None or not df.isStreaming or not is_micro_batch(self.trigger or "once"):
            return df.withWatermark(column, delay)
        from pyspark.sql import functions as F

        from eventlake.durations import duration_ms
        from eventlake.transforms.heartbeat import HEARTBEAT, IdleWatch, with_heartbeats

        signal = self.run.service(IdleWatch).watch(
            self.query_name, self.settings.kafka, self.kafka_topics(), str(self.checkpoint),
            duration_ms(timeout) / 1000,
        )  # fmt: skip
        beating = with_heartbeats(self.spark, df, column, signal=signal)
        # Spark pushes filters that do not read the event time below the watermark (and
        # so out of the heartbeat branch): this one reads it, so it stays above.
        real = ~(F.col(HEARTBEAT) & F.col(column).isNotNull())
        return beating.withWatermark(column, delay).where(real).drop(HEARTBEAT)

    def kafka_topics(self) -> list[str]:
        """The topics the flow reads; EL-PIPELINE-002 when an input is not Kafka."""
        found = [i.topics(self) for i in self.sources]
        if not found or not all(found):
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"flow '{self.query_name}' has idle_timeout but reads "
                + " + ".join(i.describe(self) for i in self.sources)
                + ".",
                expected="Kafka inputs only for pipelines.<p>.idle_timeout",
                fix="unset idle_timeout for this pipeline, or read Kafka",
            )
        return [t for topics in found for t in topics]
