"""Declare pipelines of named flows, plan them against config, run them."""

from __future__ import annotations

from eventlake.pipelines.api import REGISTRY, FlowSpec, Pipeline, PipelineParams
from eventlake.pipelines.context import FlowContext
from eventlake.pipelines.io import (
    ConsoleOutput,
    DeltaInput,
    DeltaOutput,
    FanOut,
    FilesInput,
    FilesOutput,
    HttpOutput,
    Input,
    KafkaInput,
    KafkaOutput,
    MemoryOutput,
    MergeDelta,
    Output,
    RateInput,
    Target,
    ToDelta,
    ToKafka,
    ToPostgres,
)

__all__ = [
    "REGISTRY",
    "ConsoleOutput",
    "DeltaInput",
    "DeltaOutput",
    "FanOut",
    "FilesInput",
    "FilesOutput",
    "FlowContext",
    "FlowSpec",
    "HttpOutput",
    "Input",
    "KafkaInput",
    "KafkaOutput",
    "MemoryOutput",
    "MergeDelta",
    "Output",
    "Pipeline",
    "PipelineParams",
    "RateInput",
    "Target",
    "ToDelta",
    "ToKafka",
    "ToPostgres",
]
