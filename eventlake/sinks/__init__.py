"""Streaming sinks and batch writers; each states its delivery guarantee in its docstring."""

from __future__ import annotations

from eventlake.sinks.base import Sink
from eventlake.sinks.batch import BatchContext, BatchWriter, ForeachBatchSink
from eventlake.sinks.debug import ConsoleSink, MemorySink
from eventlake.sinks.delta import DeltaAppendSink, DeltaBatchAppend, DeltaMerge, delta_transaction
from eventlake.sinks.files import FileSink
from eventlake.sinks.foreach import HttpRowSink
from eventlake.sinks.kafka import KafkaBatchWrite, KafkaSink
from eventlake.sinks.postgres import PostgresUpsert

__all__ = [
    "BatchContext",
    "BatchWriter",
    "ConsoleSink",
    "DeltaAppendSink",
    "DeltaBatchAppend",
    "DeltaMerge",
    "FileSink",
    "ForeachBatchSink",
    "HttpRowSink",
    "KafkaBatchWrite",
    "KafkaSink",
    "MemorySink",
    "PostgresUpsert",
    "Sink",
    "delta_transaction",
]
