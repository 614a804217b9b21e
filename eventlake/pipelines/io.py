"""What flows declare as inputs and outputs; resolved against config when a flow starts.

Inputs and outputs name tables by ``(layer, table)`` and topics by config key, never by
path or literal address, so one declaration runs on a laptop and on a cluster.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.sinks import (
    BatchWriter,
    ConsoleSink,
    DeltaAppendSink,
    DeltaBatchAppend,
    DeltaMerge,
    FileSink,
    ForeachBatchSink,
    HttpRowSink,
    KafkaBatchWrite,
    KafkaSink,
    MemorySink,
    PostgresUpsert,
    Sink,
)
from eventlake.sinks.batch import BatchContext
from eventlake.sinks.delta import MergeBuilder
from eventlake.sources import DeltaSource, FileSource, KafkaSource, RateSource, Source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    from eventlake.pipelines.context import FlowContext

TableRef = tuple[str, str]
#: Turns a batch into what a fan-out target writes; sees the flow's context (tables, params).
FlowPrepare = Callable[["FlowContext", "DataFrame", BatchContext], "DataFrame"]


def _bind(prepare: FlowPrepare | None, ctx: FlowContext) -> Callable[..., DataFrame] | None:
    return partial(prepare, ctx) if prepare is not None else None


class Endpoint(ABC):
    """What inputs and outputs share: a description, the lake table and topics they touch."""

    @abstractmethod
    def describe(self, ctx: FlowContext | None = None) -> str: ...

    def table(self) -> TableRef | None:
        """The (layer, table) read or written, when it is a lake table: it orders flows."""
        return None

    def tables(self) -> list[TableRef]:
        """Every lake table written (several for a fan-out)."""
        table = self.table()
        return [table] if table is not None else []

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


class Target(ABC):
    """One destination of a :class:`FanOut`: resolved into a batch writer."""

    @abstractmethod
    def writer(self, ctx: FlowContext) -> BatchWriter: ...

    @abstractmethod
    def describe(self, ctx: FlowContext | None = None) -> str: ...

    def table(self) -> TableRef | None:
        return None

    def topics(self, ctx: FlowContext) -> list[str]:
        return []

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:  # noqa: B027
        """Create the destination before the flows start (downstream flows may read it)."""


@dataclass(frozen=True)
class ToDelta(Target):
    """Append to ``<layer>/<table>`` with Delta's idempotent-write options (exactly-once).
    With ``prepare``, give the written columns as ``schema`` (DDL) to create the table."""

    layer: str
    name: str
    prepare: FlowPrepare | None = None
    schema: str | None = None
    partition_by: tuple[str, ...] = ()
    writer_name: str | None = None

    def writer(self, ctx: FlowContext) -> DeltaBatchAppend:
        return DeltaBatchAppend(
            path=ctx.table_path(self.layer, self.name),
            name=self.writer_name or f"delta:{self.layer}/{self.name}",
            partition_by=self.partition_by,
            prepare=_bind(self.prepare, ctx),
        )

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"delta:{self.layer}/{self.name}"

    def table(self) -> TableRef:
        return (self.layer, self.name)

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        if self.prepare is not None and self.schema is None:
            return
        written = _struct(ctx, self.schema) if self.schema else schema
        DeltaOutput(self.layer, self.name, self.partition_by).ensure(ctx, written)


@dataclass(frozen=True)
class MergeDelta(Target):
    """MERGE into ``<layer>/<table>`` (exactly-once: Delta transaction ids per batch).
    ``build(target, source, batch)`` returns the merge; ``schema`` (DDL) creates the table."""

    layer: str
    name: str
    build: MergeBuilder
    schema: str
    prepare: FlowPrepare | None = None
    partition_by: tuple[str, ...] = ()
    writer_name: str | None = None

    def writer(self, ctx: FlowContext) -> DeltaMerge:
        return DeltaMerge(
            path=ctx.table_path(self.layer, self.name),
            build=self.build,
            schema=self.schema,
            name=self.writer_name or f"merge:{self.layer}/{self.name}",
            prepare=_bind(self.prepare, ctx),
            partition_by=self.partition_by,
        )

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"merge:{self.layer}/{self.name}"

    def table(self) -> TableRef:
        return (self.layer, self.name)

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        self.writer(ctx).ensure(ctx.spark)


@dataclass(frozen=True)
class ToPostgres(Target):
    """Upsert into PostgreSQL table ``pipelines.<p>.<table_param>`` (exactly-once; see
    PostgresUpsert), on the server of the ``postgres`` settings."""

    table_param: str
    key: tuple[str, ...]
    order_by: tuple[str, ...] = ()
    delete_flag: str | None = None
    prepare: FlowPrepare | None = None

    def _table(self, ctx: FlowContext) -> str:
        return str(getattr(ctx.params, self.table_param))

    def writer(self, ctx: FlowContext) -> PostgresUpsert:
        return PostgresUpsert(
            settings=ctx.settings.postgres,
            table=self._table(ctx),
            key=self.key,
            order_by=self.order_by,
            delete_flag=self.delete_flag,
            name=f"postgres:{self._table(ctx)}",
            prepare=_bind(self.prepare, ctx),
        )

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"postgres:{self._table(ctx) if ctx else self.table_param}"


@dataclass(frozen=True)
class ToKafka(Target):
    """Send ``key``/``value`` rows to topic ``pipelines.<p>.<topic_param>`` (at-least-once)."""

    topic_param: str
    prepare: FlowPrepare | None = None

    def _topic(self, ctx: FlowContext) -> str:
        return str(getattr(ctx.params, self.topic_param))

    def writer(self, ctx: FlowContext) -> KafkaBatchWrite:
        return KafkaBatchWrite(
            kafka=ctx.settings.kafka,
            topic=self._topic(ctx),
            name=f"kafka:{self._topic(ctx)}",
            prepare=_bind(self.prepare, ctx),
        )

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"kafka:{self._topic(ctx) if ctx else self.topic_param}"

    def topics(self, ctx: FlowContext) -> list[str]:
        return [self._topic(ctx)]


class FanOut(Output):
    """Write each micro-batch to every target, in order, reading the source once.

    A failure in any target fails the batch, which is then retried whole; targets that
    had already written it skip it (Delta and PostgreSQL are exactly-once, Kafka
    at-least-once). One target is just a foreachBatch writer.
    """

    def __init__(self, *targets: Target) -> None:
        if not targets:
            raise ValueError("FanOut needs at least one target")
        self.targets = targets

    def resolve(self, ctx: FlowContext) -> ForeachBatchSink:
        return ForeachBatchSink(tuple(t.writer(ctx) for t in self.targets))

    def describe(self, ctx: FlowContext | None = None) -> str:
        return " + ".join(t.describe(ctx) for t in self.targets)

    def tables(self) -> list[TableRef]:
        return [t for t in (target.table() for target in self.targets) if t is not None]

    def topics(self, ctx: FlowContext) -> list[str]:
        return [topic for t in self.targets for topic in t.topics(ctx)]

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        for target in self.targets:
            target.ensure(ctx, schema)


@dataclass(frozen=True)
class HttpOutput(Output):
    """POST each row to the URL ``pipelines.<p>.<url_param>`` with an idempotency key
    (at-least-once; see HttpRowSink)."""

    url_param: str

    def resolve(self, ctx: FlowContext) -> HttpRowSink:
        return HttpRowSink(url=str(getattr(ctx.params, self.url_param)))

    def describe(self, ctx: FlowContext | None = None) -> str:
        return f"http:{getattr(ctx.params, self.url_param) if ctx else self.url_param}"


def _struct(ctx: FlowContext, ddl: str) -> StructType:
    schema: StructType = ctx.spark.createDataFrame([], ddl).schema
    return schema


def _under(ctx: FlowContext, path: str) -> Path:
    p = Path(path)
    return p if p.is_absolute() else (ctx.lake_root / p).absolute()
