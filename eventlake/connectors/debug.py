"""Console and memory outputs, for looking at a flow while developing it."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventlake.connectors.base import Output
from eventlake.connectors.capabilities import Guarantee, OutputCapabilities, TriggerKind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from eventlake.context import FlowConfig, FlowContext


@dataclass(frozen=True)
class ConsoleOutput(Output):
    """Print each batch as a table (at most ``rows`` rows, ``truncate`` cutting long
    values to 20 characters) to the Python process's stdout, under a ``Batch: N`` header.

    Spark's own console sink prints from the JVM, whose output eventlake keeps in the log
    file; this one prints where ``eventlake run`` shows its progress. Micro-batch
    triggers only. Delivery guarantee: none (debugging only).
    """

    rows: int = 20
    truncate: bool = True
    capabilities = OutputCapabilities(
        guarantee=Guarantee.NONE, output_modes=frozenset({"append", "update", "complete"})
    )

    def describe(self, flow: FlowConfig | None = None) -> str:
        return "console"

    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        rows, truncate = self.rows, self.truncate

        def show(df: DataFrame, batch_id: int) -> None:
            rule = "-" * 43
            print(f"{rule}\nBatch: {batch_id}\n{rule}", flush=True)
            df.show(rows, truncate=truncate)
            sys.stdout.flush()

        return writer.foreachBatch(show).start()


@dataclass(frozen=True)
class MemoryOutput(Output):
    """Keep the rows in an in-memory table named ``<pipeline>_<flow>`` (``spark.table``).

    Delivery guarantee: none across restarts (the table lives in the driver); for tests
    and notebooks only. Append and complete modes.
    """

    capabilities = OutputCapabilities(
        guarantee=Guarantee.NONE,
        output_modes=frozenset({"append", "complete"}),
        triggers=frozenset({TriggerKind.MICRO_BATCH, TriggerKind.CONTINUOUS}),
    )

    def describe(self, flow: FlowConfig | None = None) -> str:
        return "memory"

    def start_writer(
        self, writer: DataStreamWriter, ctx: FlowContext, output_mode: str
    ) -> StreamingQuery:
        # The memory table is named after the query; dots would read as a database name.
        return writer.queryName(ctx.query_name.replace(".", "_")).format("memory").start()
