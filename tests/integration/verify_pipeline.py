"""The pipeline test_verify.py checks: a correct windowed count and a broken running
total (loaded by the test and, with --module, by `eventlake verify`)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from eventlake.connectors import DeltaOutput, FanOut, KafkaInput, ToDelta
from eventlake.context import FlowContext
from eventlake.pipelines import Pipeline

CLICK = "user STRING, ts TIMESTAMP"


clicks = Pipeline("verified")


@clicks.flow(input=KafkaInput(), output=DeltaOutput("gold", "clicks_10min"))
def per_window(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Clicks per user and 10-minute window (append: closed windows only)."""
    from pyspark.sql import functions as F

    c = F.from_json(F.col("value").cast("string"), CLICK).alias("c")
    rows = df.select(c, "partition", "offset").select("c.*", "partition", "offset")
    return (
        ctx.with_watermark(rows, "ts", "5 minutes")
        .groupBy(F.window("ts", "10 minutes"), "user")
        .count()
    )


@clicks.flow(input=KafkaInput(), output=DeltaOutput("gold", "clicks_10min_direct"))
def per_window_direct(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """The same count with its watermark set on the DataFrame, not through the context:
    verify cannot judge its late rows and says so."""
    from pyspark.sql import functions as F

    c = F.from_json(F.col("value").cast("string"), CLICK).alias("c")
    rows = df.select(c, "partition", "offset").select("c.*", "partition", "offset")
    return (
        rows.withWatermark("ts", "5 minutes").groupBy(F.window("ts", "10 minutes"), "user").count()
    )


@clicks.flow(input=KafkaInput(), output=FanOut(ToDelta("gold", "clicks_total")),
             output_mode="update")  # fmt: skip
def per_user(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Deliberately broken: update-mode running totals appended, so old totals stay."""
    from pyspark.sql import functions as F

    c = F.from_json(F.col("value").cast("string"), CLICK).alias("c")
    return df.select(c).select("c.user").groupBy("user").count()
