"""Connectors: one module per system, each holding its inputs, outputs and targets.

``kafka``, ``delta``, ``files``, ``postgres``, ``http``, ``debug`` (console, memory),
``rate``, ``iceberg`` (refused on Spark 4.2: EL-ICEBERG-001); ``fanout`` writes a batch to
several targets; ``base`` holds the vocabulary.
"""

from __future__ import annotations

from eventlake.connectors.base import BatchContext, BatchFunction, Input, Output, Target
from eventlake.connectors.capabilities import (
    Guarantee,
    InputCapabilities,
    OutputCapabilities,
    TriggerKind,
)
from eventlake.connectors.debug import ConsoleOutput, MemoryOutput
from eventlake.connectors.delta import (
    DeltaInput,
    DeltaOutput,
    MergeBuilder,
    MergeDelta,
    ToDelta,
    ensure_delta_table,
    marked_commits,
    write_once,
)
from eventlake.connectors.fanout import FanOut
from eventlake.connectors.files import FilesInput, FilesOutput
from eventlake.connectors.http import HttpOutput
from eventlake.connectors.iceberg import IcebergInput, IcebergOutput
from eventlake.connectors.kafka import (
    KafkaInput,
    KafkaOutput,
    ToKafka,
    ToKafkaExactlyOnce,
    kafka_records,
)
from eventlake.connectors.postgres import ToPostgres
from eventlake.connectors.rate import RateInput

__all__ = [
    "BatchContext",
    "BatchFunction",
    "ConsoleOutput",
    "DeltaInput",
    "DeltaOutput",
    "FanOut",
    "FilesInput",
    "FilesOutput",
    "Guarantee",
    "HttpOutput",
    "IcebergInput",
    "IcebergOutput",
    "Input",
    "InputCapabilities",
    "KafkaInput",
    "KafkaOutput",
    "MemoryOutput",
    "MergeBuilder",
    "MergeDelta",
    "Output",
    "OutputCapabilities",
    "RateInput",
    "Target",
    "ToDelta",
    "ToKafka",
    "ToKafkaExactlyOnce",
    "ToPostgres",
    "TriggerKind",
    "ensure_delta_table",
    "kafka_records",
    "marked_commits",
    "write_once",
]
