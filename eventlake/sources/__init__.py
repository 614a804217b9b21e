"""Streaming sources: each returns an unbounded DataFrame from a replayable input."""

from __future__ import annotations

from eventlake.sources.base import Source
from eventlake.sources.kafka import KafkaSource, kafka_records

__all__ = ["KafkaSource", "Source", "kafka_records"]
