"""The pipeline test_http_security.py runs in process and, through --module, for
`eventlake status`: events de-duplicated within a watermark (so lateness can be measured)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from eventlake.connectors import DeltaOutput, KafkaInput
from eventlake.context import FlowContext
from eventlake.pipelines import Pipeline

guarded = Pipeline("guarded")


@guarded.flow(input=KafkaInput(), output=DeltaOutput("silver", "events"))
def deduplicated(ctx: FlowContext, df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    e = F.from_json(F.col("value").cast("string"), "id STRING, ts TIMESTAMP").alias("e")
    events = df.select(e, "partition", "offset").select("e.*", "partition", "offset")
    return ctx.with_watermark(events, "ts", "5 minutes").dropDuplicatesWithinWatermark(["id"])
