"""The sink contract: start a streaming write with a checkpoint, a trigger and a mode."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.triggers import apply_trigger

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter


class Sink(ABC):
    """Where a flow's rows go. Subclasses document when a write commits and what a replay
    after a crash does (their delivery guarantee)."""

    #: Output modes the sink accepts (Spark's names).
    output_modes: frozenset[str] = frozenset({"append"})

    def start(
        self,
        df: DataFrame,
        *,
        query_name: str,
        checkpoint: Path,
        trigger: str,
        output_mode: str = "append",
    ) -> StreamingQuery:
        """Start the streaming write and return the running query."""
        writer = (
            df.writeStream.queryName(query_name)
            .outputMode(output_mode)
            .option("checkpointLocation", str(checkpoint))
        )
        writer = self._bind(writer, query_name=query_name, checkpoint=checkpoint)
        return self._start(apply_trigger(writer, trigger), query_name)

    def _bind(
        self, writer: DataStreamWriter, *, query_name: str, checkpoint: Path
    ) -> DataStreamWriter:
        """Give ``writer`` what depends on the query's name or checkpoint (default: nothing)."""
        return writer

    @abstractmethod
    def _start(self, writer: DataStreamWriter, query_name: str) -> StreamingQuery:
        """Set the sink's format and options on ``writer`` and start it."""
