"""What flows declare as inputs and outputs; resolved against config when a flow starts.

Inputs and outputs name tables by ``(layer, table)`` and topics by config key, never by
path or literal address, so one declaration runs on a laptop and on a cluster.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.sinks import ConsoleSink, DeltaAppendSink, FileSink, KafkaSink, MemorySink, Sink
from eventlake.sources import DeltaSource, FileSource, KafkaSource, RateSource, Source

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from eventlake.pipelines.context import FlowContext

TableRef = tuple[str, str]


class Endpoint(ABC):
    """What inputs and outputs share: a description, the lake table and topics they touch."""

    @abstractmethod
    def describe(self, ctx: FlowContext | None = None) -> str: ...

    def table(self) -> TableRef | None:
        """The (layer, table) read or written, when it is a lake table: it orders flows."""
        return None

    def topics(self, ctx: FlowContext) -> list[str]:
        """Kafka topics read or written: checked to exist before a run starts."""
        return []


class Input(Endpoint):
    @abstractmethod
    def resolve(self, ctx: FlowContext) -> Source: ...


class Output(Endpoint):
    @abstractmethod
    def resolve(self, ctx: FlowContext) -> Sink: ...

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        """Create the destination before any flow starts, so downstream flows can read it."""


@dataclass(frozen=True)
class KafkaInput(Input):
    """Kafka topic ``pipelines.<p>.topic`` (or ``.topics.<role>``), with the pipeline's
    starting offsets, ``max_offsets_per_trigger`` and ``fail_on_data_loss``."""

    role: str | None = None

    def resolve(self, ctx: FlowContext) -> KafkaSource:
        p = ctx.params
        return KafkaSource(
            topics=(ctx.topic(self.role),),
            kafka=ctx.settings.kafka,
            starting_offsets=p.starting_offsets,
            max_offsets_per_trigger=p.max_offsets_per_trigger,
            fail_on_data_loss=p.fail_on_data_loss,
        )

    def describe(self, ctx: FlowContext | None = None) -> str:
        topic = ctx.topic(self.role) if ctx else (f"topics.{self.role}" if self.role else "topic")
        return f"kafka:{topic}"

    def topics(self, ctx: FlowContext) -> list[str]:
        return [ctx.topic(self.role)]


@dataclass(frozen=True)
class DeltaInput(Input):
    """Stream the Delta table ``<lake.root>/<layer>/<table>``."""

    layer: str
    name: str

    def resolve(self, ctx: FlowContext) -> DeltaSource:
        return DeltaSource(
            path=ctx.table_path(self.layer, self.name),
            max_files_per_trigger=ctx.params.max_files_per_trigger,
        )

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"delta:{self.layer}/{self.name}"

    def table(self) -> TableRef:
        return (self.layer, self.name)


@dataclass(frozen=True)
class FilesInput(Input):
    """New files under ``path`` (relative paths are under the lake root)."""

    path: str
    format: str
    schema: str

    def resolve(self, ctx: FlowContext) -> FileSource:
        return FileSource(path=_under(ctx, self.path), format=self.format, schema=self.schema)

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"{self.format}:{self.path}"


@dataclass(frozen=True)
class RateInput(Input):
    rows_per_second: int = 100

    def resolve(self, ctx: FlowContext) -> RateSource:
        return RateSource(self.rows_per_second)

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"rate:{self.rows_per_second}/s"


@dataclass(frozen=True)
class DeltaOutput(Output):
    """Append to the Delta table ``<lake.root>/<layer>/<table>`` (exactly-once)."""

    layer: str
    name: str
    partition_by: tuple[str, ...] = ()
    merge_schema: bool = False

    def resolve(self, ctx: FlowContext) -> DeltaAppendSink:
        return DeltaAppendSink(
            path=ctx.table_path(self.layer, self.name),
            partition_by=self.partition_by,
            merge_schema=self.merge_schema,
        )

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"delta:{self.layer}/{self.name}"

    def table(self) -> TableRef:
        return (self.layer, self.name)

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        from delta.tables import DeltaTable

        path = str(ctx.table_path(self.layer, self.name))
        if DeltaTable.isDeltaTable(ctx.spark, path):
            return
        empty = ctx.spark.createDataFrame([], schema)
        writer = empty.write.format("delta").mode("append")
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        writer.save(path)


@dataclass(frozen=True)
class KafkaOutput(Output):
    """Write ``key``/``value`` rows to a topic given by config key ``topic_param`` of the
    pipeline's params (at-least-once; see KafkaSink)."""

    topic_param: str

    def _topic(self, ctx: FlowContext) -> str:
        return str(getattr(ctx.params, self.topic_param))

    def resolve(self, ctx: FlowContext) -> KafkaSink:
        return KafkaSink(kafka=ctx.settings.kafka, topic=self._topic(ctx))

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"kafka:{self._topic(ctx) if ctx else self.topic_param}"

    def topics(self, ctx: FlowContext) -> list[str]:
        return [self._topic(ctx)]


@dataclass(frozen=True)
class FilesOutput(Output):
    path: str
    format: str = "parquet"
    partition_by: tuple[str, ...] = ()

    def resolve(self, ctx: FlowContext) -> FileSink:
        return FileSink(
            path=_under(ctx, self.path), format=self.format, partition_by=self.partition_by
        )

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"{self.format}:{self.path}"


@dataclass(frozen=True)
class ConsoleOutput(Output):
    def resolve(self, ctx: FlowContext) -> ConsoleSink:
        return ConsoleSink()

    def describe(self, ctx: FlowContext | None = None) -> str:
        return "console"


@dataclass(frozen=True)
class MemoryOutput(Output):
    """An in-memory table named ``<pipeline>_<flow>`` (tests and notebooks)."""

    def resolve(self, ctx: FlowContext) -> MemorySink:
        return MemorySink()

    def describe(self, ctx: FlowContext | None = None) -> str:
        return "memory"


def _under(ctx: FlowContext, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else (ctx.lake_root / p).absolute()
