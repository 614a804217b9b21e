"""Streaming sources: each returns an unbounded DataFrame from a replayable input."""

from __future__ import annotations

from eventlake.sources.base import Source
from eventlake.sources.delta import DeltaSource
from eventlake.sources.files import FileSource
from eventlake.sources.kafka import KafkaSource, kafka_records
from eventlake.sources.rate import RateSource

__all__ = ["DeltaSource", "FileSource", "KafkaSource", "RateSource", "Source", "kafka_records"]
