"""Rate source: ``timestamp``/``value`` rows at a fixed rate, for load tests and demos."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventlake.sources.base import Source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class RateSource(Source):
    """Generated rows; replayable because each row's value derives from its batch."""

    rows_per_second: int = 100

    def read_stream(self, spark: SparkSession) -> DataFrame:
        return (
            spark.readStream.format("rate")
            .option("rowsPerSecond", str(self.rows_per_second))
            .load()
        )
