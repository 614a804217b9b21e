"""The connector vocabulary: an :class:`Input` (where a flow reads), an :class:`Output`
(where its rows go) and, inside a fan-out, a :class:`Target` (one destination of a batch).

Declarations name tables by ``(layer, table)`` and topics by config key, never by path or
literal address, and are resolved against the flow's :class:`~eventlake.context.FlowConfig`
when the flow starts: one declaration runs on a laptop and on a cluster. Every output and
target states its delivery guarantee as a typed class attribute (an output within its
:class:`OutputCapabilities`, checked when the class is defined), and its docstring says
when a write commits and what a replay does.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventlake.connectors.capabilities import (
    Guarantee,
    InputCapabilities,
    OutputCapabilities,
)
from eventlake.scope import OutputCreation, RunScope
from eventlake.triggers import apply_trigger, is_real_time

#: The column :meth:`Input.replay` adds where it can tell which batch read each row.
REPLAYED_BATCH = "_eventlake_batch"

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType

    from eventlake.checkpoints import CheckpointLog
    from eventlake.context import FlowConfig, FlowContext

TableRef = tuple[str, str]


def _is_abstract(cls: type) -> bool:
    """Whether ``cls`` still leaves an abstract method open (``__abstractmethods__`` is
    set only after ``__init_subclass__`` has run)."""
    names = {n for base in cls.__mro__ for n, v in vars(base).items()
             if getattr(v, "__isabstractmethod__", False)}  # fmt: skip
    return any(getattr(getattr(cls, n, None), "__isabstractmethod__", False) for n in names)


def _require_declared(cls: type, attribute: str, kind: type) -> None:
    """A concrete connector class must declare ``attribute`` (a ``kind`` or a property)."""
    if _is_abstract(cls) or cls.__name__.startswith("_"):
        return
    declared = inspect.getattr_static(cls, attribute, None)
    if not isinstance(declared, kind | property):
        raise TypeError(
            f"{cls.__module__}.{cls.__name__} declares no {attribute} "
            f"({kind.__name__}): every connector states what it supports"
        )


class _Connector(ABC):
    """What inputs, outputs and targets share: a description, the tables and topics."""

    @abstractmethod
    def describe(self, flow: FlowConfig | None = None) -> str:
        """``kind:where`` (``delta:silver/orders``, ``kafka:orders``); with ``flow``, topics
        and tables as config resolves them."""

    def table(self) -> TableRef | None:
        """The (layer, table) read or written, when it is a lake table: it orders flows."""
        return None

    def tables(self) -> list[TableRef]:
        """Every lake table written (several for a fan-out)."""
        table = self.table()
        return [table] if table is not None else []

    def layout_keys(self) -> dict[TableRef, tuple[str, ...]]:
        """Per lake table written, the columns its files are laid out by (a MERGE target's
        key): its compaction clusters the table on them, or Z-orders it when the table
        cannot be clustered."""
        return {}

    def topics(self, flow: FlowConfig) -> list[str]:
        """Kafka topics read or written: checked to exist before a run starts."""
        return []

    def count_rows(self, flow: FlowConfig) -> dict[str, int | None]:
        """Rows now held by each destination, by :meth:`describe` (None: not there yet).

        Read without Spark (``eventlake status`` on a stopped pipeline)."""
        return {}


class Input(_Connector):
    """Where a flow reads: a replayable stream whose progress its checkpoint records."""

    #: What the input supports; every concrete input declares it.
    capabilities: InputCapabilities

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _require_declared(cls, "capabilities", InputCapabilities)

    @abstractmethod
    def read(self, ctx: FlowContext) -> DataFrame:
        """An unbounded DataFrame over the input."""

    def preflight(self, flow: FlowConfig, trigger: str, run: RunScope) -> None:
        """Ask outside systems, during the run's pre-flight (while the JVM starts), what
        :meth:`read` with ``trigger`` will need, keeping the answers in ``run``; by default
        nothing."""

    def read_batch(self, ctx: FlowContext) -> DataFrame:
        """Everything the input holds now, as a batch DataFrame (``eventlake lateness``)."""
        raise NotImplementedError(f"{type(self).__name__} has no batch read")

    def replay(self, ctx: FlowContext, log: CheckpointLog, last: int) -> DataFrame:
        """As a batch, every row the flow's batches up to ``last`` read, as its checkpoint
        ``log`` records them; inputs with the ``verify`` capability. A :data:`REPLAYED_BATCH`
        column, where the input can tell, holds the batch that read each row."""
        raise NotImplementedError(f"{type(self).__name__} cannot be read by offsets")


class Output(_Connector):
    """Where a flow's rows go: a streaming write with the flow's checkpoint and trigger.

    Lifecycle: :meth:`open` when the flow's query starts (or restarts), :meth:`close` when
    it has stopped; what an output opens (a connection, a producer) it holds in the run's
    scope (``ctx.run.open_resource``), which closes it with the query.
    """

    #: What the output supports and guarantees; every concrete output declares it.
    capabilities: OutputCapabilities

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _require_declared(cls, "capabilities", OutputCapabilities)

    @property
    def guarantee(self) -> Guarantee:
        """What a replayed batch does here (from :attr:`capabilities`)."""
        return self.capabilities.guarantee

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        """Create the destination before any flow starts, so downstream flows can read it."""

    def partition_columns(self) -> tuple[str, ...]:
        """The columns the destination is partitioned by (checked against the result)."""
        return ()

    def as_targets(self) -> tuple[Target, ...]:
        """The fan-out targets that write what this output writes (outputs declaring the
        ``quarantine`` capability)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be split into targets")

    def open(self, ctx: FlowContext) -> None:
        """The flow's query is about to start (or restart)."""

    def close(self, ctx: FlowContext) -> None:
        """The flow's query has stopped: release what :meth:`open` (or a batch) held."""
        ctx.run.close_resources(ctx.query_name)

    def start(
        self, df: DataFrame, ctx: FlowContext, *, trigger: str, output_mode: str = "append"
    ) -> StreamingQuery:
        """Start the streaming write of ``df`` as flow ``ctx`` and return the running query.

        Real-time mode takes update mode only; its flows are stateless (EL-V010), where
        update and append write the same rows.
        """
        if is_real_time(trigger):
            output_mode = "update"
        writer = (
            df.writeStream.queryName(ctx.query_name)
            .outputMode(output_mode)
            .option("checkpointLocation", str(ctx.checkpoint))
        )
        return self.start_writer(apply_trigger(writer, trigger), ctx, output_mode)

    @abstractmethod
    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        """Set the output's format and options on ``writer`` (its query name, mode,
        checkpoint and trigger are set) and start it."""


class BatchFunction(ABC):
    """A ``foreachBatch`` function that hands the exception it raises to the runner
    (through the run's :class:`~eventlake.scope.BatchFailures`)."""

    def __init__(self, ctx: FlowContext) -> None:
        self.ctx = ctx

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            creation = self.ctx.run.find(OutputCreation)
            if creation is not None:  # the output may still be being created
                creation.wait(self.ctx.query_name)
            self.write_batch(df, batch_id)
        except Exception as exc:
            self.ctx.run.failures.record(self.ctx.query_name, exc)
            raise

    @abstractmethod
    def write_batch(self, df: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id``."""


@dataclass(frozen=True)
class BatchContext:
    """What a target knows about the micro-batch it writes."""

    #: The flow's context (config, tables, params) as planned.
    ctx: FlowContext
    batch_id: int
    #: The checkpoint's query id: stable across restarts, new when the checkpoint is new.
    stream_id: str
    #: The batch's own session (each streaming query runs on a clone).
    spark: SparkSession

    @property
    def flow(self) -> str:
        return self.ctx.query_name

    def app_id(self, target: str) -> str:
        """The idempotency scope of ``target`` in this flow and checkpoint.

        Batch ids restart at 0 with a new checkpoint; keying by the checkpoint's query id
        keeps a fresh checkpoint from having its batches skipped as already written.
        """
        return f"{self.flow}/{target}/{self.stream_id}"

    def memo(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """``build()`` materialized once for this batch and shared by its targets: one
        snapshot of what it reads, however other flows write those tables meanwhile
        (released when the flow's next batch asks, or at the run's end)."""
        return self.ctx.run.memo.get(self.flow, name, (self.stream_id, self.batch_id), build)


#: Turns a batch into what a target writes: ``prepare(ctx, batch_df, batch)``.
Prepare = Callable[["FlowContext", "DataFrame", BatchContext], "DataFrame"]


class Target(_Connector):
    """One destination of a :class:`~eventlake.connectors.fanout.FanOut`: writes a batch."""

    #: What a replayed batch does here; every concrete target declares it.
    guarantee: Guarantee
    #: Applied to the batch before the write; None writes the batch as it is.
    prepare: Prepare | None = None
    #: How many times :meth:`write` scans the batch (the fan-out caches when the total > 1).
    reads: int = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _require_declared(cls, "guarantee", Guarantee)

    @abstractmethod
    def target_id(self, flow: FlowConfig) -> str:
        """Names the target in idempotency keys and errors; unique within its fan-out."""

    @abstractmethod
    def write(self, df: DataFrame, batch: BatchContext) -> None:
        """Write one micro-batch."""

    def rows(self, df: DataFrame, batch: BatchContext) -> DataFrame:
        """The rows this target writes: ``prepare`` applied to the batch."""
        return self.prepare(batch.ctx, df, batch) if self.prepare is not None else df

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        """Create the destination before the flows start (downstream flows may read it)."""

    def open(self, ctx: FlowContext) -> None:
        """The fan-out's query is about to start (or restart); what this opens it holds in
        ``ctx.run.open_resource`` under the query's name, closed when the query stops."""
