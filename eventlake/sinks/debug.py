"""Console and memory sinks, for looking at a flow while developing it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventlake.sinks.base import Sink

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter


@dataclass(frozen=True)
class ConsoleSink(Sink):
    """Print each batch to stdout. Delivery guarantee: none (debugging only)."""

    rows: int = 20
    output_modes = frozenset({"append", "update", "complete"})

    def _start(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        return writer.format("console").option("numRows", str(self.rows)).start()


@dataclass(frozen=True)
class MemorySink(Sink):
    """Keep the rows in an in-memory table named after the query (``spark.table(name)``).

    Delivery guarantee: none across restarts (the table lives in the driver); for tests
    and notebooks only. Append and complete modes.
    """

    output_modes = frozenset({"append", "complete"})

    def _start(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        # The memory table is named after the query; dots would read as a database name.
        return writer.queryName(query_name.replace(".", "_")).format("memory").start()
