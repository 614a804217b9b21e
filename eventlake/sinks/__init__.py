"""Streaming sinks; each states its delivery guarantee in its docstring."""

from __future__ import annotations

from eventlake.sinks.base import Sink
from eventlake.sinks.delta import DeltaAppendSink

__all__ = ["DeltaAppendSink", "Sink"]
