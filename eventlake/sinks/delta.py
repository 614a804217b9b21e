"""Delta Lake append sink (Spark's native Delta streaming sink)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.sinks.base import Sink

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter


@dataclass(frozen=True)
class DeltaAppendSink(Sink):
    """Append each micro-batch to the Delta table at ``path``.

    Delivery guarantee: exactly-once. A batch commits when its Delta transaction commits;
    that commit records the query id and batch id (a Delta ``SetTransaction``). After a
    crash the query restarts from its checkpoint and replays the last planned batch with
    the same id and offsets; Delta sees that id already committed and skips the write, so
    no row is lost or duplicated. Requires a checkpoint owned by this query alone.
    Output modes: append and complete (complete overwrites the table each batch).
    """

    path: Path
    partition_by: tuple[str, ...] = ()
    merge_schema: bool = False
    output_modes = frozenset({"append", "complete"})

    def _start(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        writer = writer.format("delta")
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        if self.merge_schema:
            writer = writer.option("mergeSchema", "true")
        return writer.start(str(self.path))
