"""The source contract."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Source(ABC):
    """A replayable streaming input: the checkpoint records how far it was read."""

    @abstractmethod
    def read_stream(self, spark: SparkSession) -> DataFrame:
        """An unbounded DataFrame over the input."""
