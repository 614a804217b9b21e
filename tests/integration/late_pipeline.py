"""The pipeline test_late_rows.py runs: one topic of events, three stateful flows that
drop late rows differently, and one that opts out of keeping them."""

from __future__ import annotations

from pyspark.sql import DataFrame

from eventlake.connectors import DeltaInput, DeltaOutput, KafkaInput
from eventlake.context import FlowContext
from eventlake.pipelines import Pipeline

EVENT = "id STRING, user STRING, ts TIMESTAMP"

late = Pipeline("late")


def events(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    e = F.from_json(F.col("value").cast("string"), EVENT).alias("e")
    return df.select(e, "partition", "offset").select("e.*", "partition", "offset")


@late.flow(input=KafkaInput(), output=DeltaOutput("silver", "events"))
def deduplicated(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Events de-duplicated by id within a 5-minute watermark."""
    return ctx.with_watermark(events(df), "ts", "5 minutes").dropDuplicatesWithinWatermark(["id"])


@late.flow(input=KafkaInput(), output=DeltaOutput("gold", "sliding"))
def sliding(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Events per user and 10-minute window sliding by 5 minutes."""
    from pyspark.sql import functions as F

    watermarked = ctx.with_watermark(events(df), "ts", "5 minutes")
    return watermarked.groupBy(F.window("ts", "10 minutes", "5 minutes"), "user").count()


@late.flow(input=DeltaInput("silver", "events"), output=DeltaOutput("gold", "sessions"))
def sessions(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Sessions per user with a 3-minute gap and a 1-minute watermark, from the
    de-duplicated table."""
    from pyspark.sql import functions as F

    return (
        ctx.with_watermark(df, "ts", "1 minute")
        .groupBy(F.session_window("ts", "3 minutes").alias("session"), "user")
        .count()
    )


@late.flow(input=KafkaInput(), output=DeltaOutput("silver", "events_raw"), keep_late=False)
def opted_out(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """The de-duplication of ``deduplicated``, with its late rows not kept."""
    return ctx.with_watermark(events(df), "ts", "5 minutes").dropDuplicatesWithinWatermark(["id"])
