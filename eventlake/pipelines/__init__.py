"""Declare pipelines of named flows, plan them against config, run them."""

from __future__ import annotations

from eventlake.pipelines.api import REGISTRY, FlowSpec, Pipeline, PipelineParams
from eventlake.pipelines.context import FlowContext
from eventlake.pipelines.io import (
    ConsoleOutput,
    DeltaInput,
    DeltaOutput,
    FilesInput,
    FilesOutput,
    Input,
    KafkaInput,
    KafkaOutput,
    MemoryOutput,
    Output,
    RateInput,
)

__all__ = [
    "REGISTRY",
    "ConsoleOutput",
    "DeltaInput",
    "DeltaOutput",
    "FilesInput",
    "FilesOutput",
    "FlowContext",
    "FlowSpec",
    "Input",
    "KafkaInput",
    "KafkaOutput",
    "MemoryOutput",
    "Output",
    "Pipeline",
    "PipelineParams",
    "RateInput",
]
