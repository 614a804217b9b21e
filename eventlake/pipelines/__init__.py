"""Declare pipelines of named flows, plan them against config, run them.

Inputs, outputs and fan-out targets live in :mod:`eventlake.connectors`.
"""

from __future__ import annotations

from eventlake.config.params import PipelineParams
from eventlake.context import FlowConfig, FlowContext
from eventlake.durations import SparkInterval
from eventlake.pipelines.api import FlowSpec, Pipeline, Registry, registration
from eventlake.pipelines.expectations import Expectation, expect

__all__ = [
    "Expectation",
    "FlowConfig",
    "FlowContext",
    "FlowSpec",
    "Pipeline",
    "PipelineParams",
    "Registry",
    "SparkInterval",
    "expect",
    "registration",
]
