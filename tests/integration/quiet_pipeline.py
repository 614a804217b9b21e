"""The pipeline the idle-source tests run (test_idle_sources.py in process, and on the
Spark cluster through --module): clicks counted per user and 10-minute window."""

from __future__ import annotations

from pyspark.sql import DataFrame

from eventlake.connectors import DeltaOutput, KafkaInput
from eventlake.context import FlowContext
from eventlake.pipelines import Pipeline

CLICK = "user STRING, ts TIMESTAMP"

quiet = Pipeline("quiet")


@quiet.flow(input=KafkaInput(), output=DeltaOutput("gold", "clicks_10min"))
def per_window(ctx: FlowContext, df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    c = F.from_json(F.col("value").cast("string"), CLICK).alias("c")
    rows = ctx.with_watermark(df.select(c).select("c.*"), "ts", "5 minutes")
    return rows.groupBy(F.window("ts", "10 minutes"), "user").count()
