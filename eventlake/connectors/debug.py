"""Console and memory outputs, for looking at a flow while developing it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventlake.connectors.base import Guarantee, Output

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from eventlake.context import FlowConfig, FlowContext


@dataclass(frozen=True)
class ConsoleOutput(Output):
    """Print each batch to stdout. Delivery guarantee: none (debugging only)."""

    rows: int = 20
    guarantee = Guarantee.NONE
    output_modes = frozenset({"append", "update", "complete"})

    def describe(self, flow: FlowConfig | None = None) -> str:
        return "console"

    def _start(self, writer: DataStreamWriter, ctx: FlowContext) -> StreamingQuery:
        return writer.format("console").option("numRows", str(self.rows)).start()


@dataclass(frozen=True)
class MemoryOutput(Output):
    """Keep the rows in an in-memory table named ``<pipeline>_<flow>`` (``spark.table``).

    Delivery guarantee: none across restarts (the table lives in the driver); for tests
    and notebooks only. Append and complete modes.
    """

    guarantee = Guarantee.NONE
    output_modes = frozenset({"append", "complete"})

    def describe(self, flow: FlowConfig | None = None) -> str:
        return "memory"

    def _start(self, writer: DataStreamWriter, ctx: FlowContext) -> StreamingQuery:
        # The memory table is named after the query; dots would read as a database name.
        return writer.queryName(ctx.query_name.replace(".", "_")).format("memory").start()
