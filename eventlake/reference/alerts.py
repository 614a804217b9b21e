"""The alerts pipeline: orders over a threshold to an alerts topic in real-time mode.

Input: the orders topic (JSON ``order_id``, ``amount``, ...). ``big_orders`` runs with
Spark's real-time trigger (``real-time``): records stream through long-running tasks
instead of waiting for a micro-batch, so an alert leaves milliseconds after its order
arrives. Stateless and Kafka -> Kafka, as real-time mode requires (EL-V010); the task
slots must cover the input topic's partitions (one long-running task per partition).
Output: ``key`` = ``order_id``, ``value`` = the order's JSON as received (at-least-once,
as every Kafka output).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from eventlake.connectors.kafka import KafkaInput, KafkaOutput
from eventlake.pipelines import Pipeline, PipelineParams

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext


class AlertsParams(PipelineParams):
    topic: str | None = Field(default="orders", description="The orders topic.")
    alerts_topic: str = Field(default="order_alerts", description="Where alerts go.")
    threshold: float = Field(default=1000.0, description="An order over this is an alert.")


alerts = Pipeline(
    "alerts",
    params=AlertsParams,
    description="Kafka orders over a threshold -> alerts topic, in real-time mode",
)


@alerts.flow(input=KafkaInput(), output=KafkaOutput("alerts_topic"), trigger="real-time")
def big_orders(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Orders whose amount is over the threshold, as received, keyed by order id."""
    from pyspark.sql import functions as F

    p = ctx.typed(AlertsParams)
    value = F.col("value").cast("string")
    amount = F.get_json_object(value, "$.amount").cast("double")
    return df.where(amount > F.lit(p.threshold)).select(F.col("key"), F.col("value"))
