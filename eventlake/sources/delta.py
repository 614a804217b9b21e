"""Delta source: stream the appends of a Delta table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.sources.base import Source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class DeltaSource(Source):
    """Stream a Delta table's new rows; the checkpoint records the table version read.

    ``max_files_per_trigger`` bounds each micro-batch (Delta's default is 1000 files).
    The table must only receive appends (updates or deletes upstream stop the stream).
    """

    path: Path
    max_files_per_trigger: int | None = None

    def read_stream(self, spark: SparkSession) -> DataFrame:
        reader = spark.readStream.format("delta")
        if self.max_files_per_trigger is not None:
            reader = reader.option("maxFilesPerTrigger", str(self.max_files_per_trigger))
        return reader.load(str(self.path))
