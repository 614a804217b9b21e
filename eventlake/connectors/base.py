"""The connector vocabulary: an :class:`Input` (where a flow reads), an :class:`Output`
(where its rows go) and, inside a fan-out, a :class:`Target` (one destination of a batch).

Declarations name tables by ``(layer, table)`` and topics by config key, never by path or
literal address, and are resolved against the flow's :class:`~eventlake.context.FlowConfig`
when the flow starts: one declaration runs on a laptop and on a cluster. Every output and
target states its delivery guarantee as a typed class attribute, and its docstring says
when a write commits and what a replay does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from eventlake.triggers import apply_trigger, is_real_time

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType

    from eventlake.context import FlowConfig, FlowContext

TableRef = tuple[str, str]


class Guarantee(StrEnum):
    """What a replayed batch (after a crash or a retry) does to an output."""

    #: A replay writes nothing new: every record is in the output once.
    EXACTLY_ONCE = "exactly-once"
    #: A replay writes its records again: none is lost, some may be duplicated.
    AT_LEAST_ONCE = "at-least-once"
    #: No promise across restarts (debugging outputs).
    NONE = "none"

    @property
    def strength(self) -> int:
        return {Guarantee.NONE: 0, Guarantee.AT_LEAST_ONCE: 1, Guarantee.EXACTLY_ONCE: 2}[self]

    def covers(self, required: Guarantee) -> bool:
        """True when this guarantee is at least as strong as ``required``."""
        return self.strength >= required.strength

    @classmethod
    def weakest(cls, guarantees: Iterable[Guarantee]) -> Guarantee:
        return min(guarantees, key=lambda g: g.strength, default=cls.EXACTLY_ONCE)


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

    def topics(self, flow: FlowConfig) -> list[str]:
        """Kafka topics read or written: checked to exist before a run starts."""
        return []

    def count_rows(self, flow: FlowConfig) -> dict[str, int | None]:
        """Rows now held by each destination, by :meth:`describe` (None: not there yet).

        Read without Spark (``eventlake status`` on a stopped pipeline)."""
        return {}


class Input(_Connector):
    """Where a flow reads: a replayable stream whose progress its checkpoint records."""

    @abstractmethod
    def read(self, ctx: FlowContext) -> DataFrame:
        """An unbounded DataFrame over the input."""

    def read_batch(self, ctx: FlowContext) -> DataFrame:
        """Everything the input holds now, as a batch DataFrame (``eventlake lateness``)."""
        raise NotImplementedError(f"{type(self).__name__} has no batch read")


class Output(_Connector):
    """Where a flow's rows go: a streaming write with the flow's checkpoint and trigger."""

    #: What a replayed batch does here; subclasses set it.
    guarantee: Guarantee
    #: Output modes the output accepts (Spark's names).
    output_modes: frozenset[str] = frozenset({"append"})

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        """Create the destination before any flow starts, so downstream flows can read it."""

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
        return self._start_in_mode(apply_trigger(writer, trigger), ctx, output_mode)

    @abstractmethod
    def _start(self, writer: DataStreamWriter, ctx: FlowContext) -> StreamingQuery:
        """Set the output's format and options on ``writer`` and start it."""

    def _start_in_mode(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        """:meth:`_start`, for outputs whose writes depend on the output mode."""
        return self._start(writer, ctx)


#: The exception a ``foreachBatch`` function raised, by query name, until the runner takes
#: it: Spark passes only its text to the JVM, so this keeps its type and JVM causes.
_batch_failures: dict[str, BaseException] = {}


def record_batch_failure(query_name: str, exc: BaseException) -> None:
    """Keep ``exc``, raised by the batch function of query ``query_name``."""
    _batch_failures[query_name] = exc


def take_batch_failure(query_name: str) -> BaseException | None:
    """The exception the batch function of ``query_name`` last raised, once."""
    return _batch_failures.pop(query_name, None)


class BatchFunction(ABC):
    """A ``foreachBatch`` function that keeps the exception it raises for the runner."""

    def __init__(self, query_name: str) -> None:
        self.query_name = query_name

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        try:
            self.write_batch(df, batch_id)
        except Exception as exc:
            record_batch_failure(self.query_name, exc)
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


#: Turns a batch into what a target writes: ``prepare(ctx, batch_df, batch)``.
Prepare = Callable[["FlowContext", "DataFrame", BatchContext], "DataFrame"]


class Target(_Connector):
    """One destination of a :class:`~eventlake.connectors.fanout.FanOut`: writes a batch."""

    #: What a replayed batch does here; subclasses set it.
    guarantee: Guarantee
    #: Applied to the batch before the write; None writes the batch as it is.
    prepare: Prepare | None = None
    #: How many times :meth:`write` scans the batch (the fan-out caches when the total > 1).
    reads: int = 1

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
