"""Streaming sinks; each states its delivery guarantee in its docstring."""

from __future__ import annotations

from eventlake.sinks.base import Sink
from eventlake.sinks.debug import ConsoleSink, MemorySink
from eventlake.sinks.delta import DeltaAppendSink
from eventlake.sinks.files import FileSink
from eventlake.sinks.kafka import KafkaSink

__all__ = ["ConsoleSink", "DeltaAppendSink", "FileSink", "KafkaSink", "MemorySink", "Sink"]
