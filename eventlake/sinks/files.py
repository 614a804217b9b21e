"""Files sink: append micro-batches as json, csv or parquet files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.sinks.base import Sink

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter


@dataclass(frozen=True)
class FileSink(Sink):
    """Write each batch's rows as new files under ``path``.

    Delivery guarantee: exactly-once for readers that use the sink's ``_spark_metadata``
    log (Spark, and ``spark.read`` on the folder): files of a batch become visible when
    the batch's log entry commits; files left by a crashed batch are never listed.
    Plain file listings (other tools) may see those orphan files. Append mode only.
    """

    path: Path
    format: str = "parquet"
    partition_by: tuple[str, ...] = ()

    def _start(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        writer = writer.format(self.format)
        if self.format == "csv":
            writer = writer.option("header", "true")
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        return writer.start(str(self.path))
