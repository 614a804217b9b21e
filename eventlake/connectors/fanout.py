"""The fan-out: each micro-batch written to several targets through ``foreachBatch``.

Spark's ``foreachBatch`` calls a function with each micro-batch and its id. After a crash
the query re-runs the last planned batch with the same id and the same input, so a target
that records the id atomically with its write (a Delta transaction id, a commit-table row)
skips a batch it has already written: exactly-once end to end. Targets that cannot
(Kafka) are at-least-once, and say so.

The batch is read from the input once, cached when more than one read follows and always
released; a failure in any target fails the batch, so the whole batch is retried and the
targets that had already written it skip it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eventlake.checkpoints import stream_id
from eventlake.connectors.base import BatchContext, BatchFunction, Output, TableRef, Target
from eventlake.connectors.capabilities import Guarantee, OutputCapabilities
from eventlake.errors import ErrorCode, EventlakeError, describe, fix_for, recovery_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter
    from pyspark.sql.types import StructType

    from eventlake.context import FlowConfig, FlowContext


class FanOut(Output):
    """Write each micro-batch to every target, in order, reading the input once.

    Delivery guarantee: that of its weakest target (:attr:`guarantee`). Spark records the
    batch as committed only after every target returned; a failure in any target fails
    the batch, which is then retried whole, and targets that had written it skip it.
    Output modes: all three; the targets see each batch as Spark's mode defines it.
    Each target is opened when the query starts and closed when it stops.
    """

    def __init__(self, *targets: Target) -> None:
        if not targets:
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                "FanOut() was given no target.",
                expected="one or more targets (ToDelta, MergeDelta, ToPostgres, ToKafka)",
                fix="pass the targets: FanOut(ToDelta(...), ...)",
            )
        self.targets = targets

    @property
    def capabilities(self) -> OutputCapabilities:  # type: ignore[override]
        """its weakest target's; any output mode; quarantine beside a lake target"""
        return OutputCapabilities(
            guarantee=Guarantee.weakest(t.guarantee for t in self.targets),
            output_modes=frozenset({"append", "update", "complete"}),
            quarantine=any(t.table() is not None for t in self.targets),
        )

    def as_targets(self) -> tuple[Target, ...]:
        return self.targets

    def open(self, ctx: FlowContext) -> None:
        for target in self.targets:
            target.open(ctx)

    def describe(self, flow: FlowConfig | None = None) -> str:
        return " + ".join(t.describe(flow) for t in self.targets)

    def count_rows(self, flow: FlowConfig) -> dict[str, int | None]:
        return {k: v for t in self.targets for k, v in t.count_rows(flow).items()}

    def tables(self) -> list[TableRef]:
        return [t for t in (target.table() for target in self.targets) if t is not None]

    def layout_keys(self) -> dict[TableRef, tuple[str, ...]]:
        return {k: v for target in self.targets for k, v in target.layout_keys().items()}

    def topics(self, flow: FlowConfig) -> list[str]:
        return [topic for t in self.targets for topic in t.topics(flow)]

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        for target in self.targets:
            target.ensure(ctx, schema)

    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        return writer.foreachBatch(BatchHandler(self.targets, ctx)).start()


class BatchHandler(BatchFunction):
    """The function Spark calls with each batch: runs every target, in order."""

    def __init__(self, targets: Sequence[Target], ctx: FlowContext) -> None:
        names = [t.target_id(ctx) for t in targets]
        if len(set(names)) != len(names):
            raise EventlakeError(
                ErrorCode.PIPELINE_INVALID,
                f"flow '{ctx.query_name}' has two fan-out targets with one name: {names}.",
                expected="a distinct name per target (it scopes the target's idempotency)",
                fix="write each table or topic through one target of the fan-out",
            )
        super().__init__(ctx)
        self.targets = tuple(targets)
        self._stream_id: str | None = None

    def write_batch(self, df: DataFrame, batch_id: int) -> None:
        if self._stream_id is None:
            self._stream_id = stream_id(self.ctx.checkpoint)
        batch = BatchContext(self.ctx, batch_id, self._stream_id, df.sparkSession)
        cache = sum(t.reads for t in self.targets) > 1
        if cache:
            df = df.persist()
        try:
            for target in self.targets:
                self.write_one(target, df, batch)
        finally:
            if cache:
                df.unpersist()

    def write_one(self, target: Target, df: DataFrame, batch: BatchContext) -> None:
        """Write the batch to one target; any failure becomes EL-SINK-001 for the batch."""
        try:
            target.write(df, batch)
        except EventlakeError:
            raise
        except Exception as exc:
            raise EventlakeError(
                ErrorCode.SINK_WRITE_FAILED,
                f"target '{target.target_id(self.ctx)}' of flow '{batch.flow}' failed on batch "
                f"{batch.batch_id}: {describe(exc)}",
                fix=fix_for(exc),
                recovery=recovery_of(exc),
            ) from exc
