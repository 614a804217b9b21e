"""Rate: ``timestamp``/``value`` rows at a fixed rate, for load tests and demos."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventlake.connectors.base import Input
from eventlake.connectors.capabilities import InputCapabilities, TriggerKind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.context import FlowConfig, FlowContext


@dataclass(frozen=True)
class RateInput(Input):
    """Generated rows; replayable because each row's value derives from its batch."""

    rows_per_second: int = 100
    capabilities = InputCapabilities(
        triggers=frozenset({TriggerKind.MICRO_BATCH, TriggerKind.CONTINUOUS})
    )

    def read(self, ctx: FlowContext) -> DataFrame:
        reader = ctx.spark.readStream.format("rate")
        return reader.option("rowsPerSecond", str(self.rows_per_second)).load()

    def describe(self, flow: FlowConfig | None = None) -> str:
        return f"rate:{self.rows_per_second}/s"
