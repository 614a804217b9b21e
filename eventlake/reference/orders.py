"""The orders medallion pipeline: Kafka -> bronze and silver (+ quarantine) -> gold.

Input: JSON orders ``order_id``, ``user_id``, ``category``, ``region``, ``amount``,
``event_time`` (ISO-8601 text), keyed by ``order_id``.

- ``bronze``: every Kafka record as received (bronze/orders).
- ``silver``: valid orders, typed, de-duplicated by ``order_id`` within ``dedup_delay``
  (silver/orders). It reads the topic itself, beside ``bronze``, so an order reaches
  silver in one batch instead of two, and gold a batch sooner: bronze is the archive and
  the quarantine's input, not a hop on the way to gold. Orders later than
  ``dedup_delay`` behind the newest event time are dropped by Spark's watermark; the
  progress line reports them as "late dropped". It runs at ``0 seconds`` (a batch as soon
  as the last ends), as does ``revenue_hourly``: they are the hops a reader waits on.
- ``quarantine``: records in bronze that are not JSON objects or break a rule, with the raw
  value, Kafka coordinates and ``reason`` (silver/orders_quarantine).
- ``revenue_hourly``: per ``category`` and tumbling window: order count and revenue,
  written once per window when the watermark closes it (gold/revenue_hourly).
- ``category_sliding``: per ``category`` and sliding window: order count
  (gold/category_orders_sliding).
- ``high_value``: orders over ``high_value_threshold`` to Kafka, key ``order_id``
  (at-least-once).
- ``enriched``: orders joined (left) with the static Delta dimension
  reference/categories (``category``, ``department``, ``margin_rate``): each micro-batch
  reads the table's latest version, so changes apply to the next batch without a restart
  (gold/orders_enriched).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from eventlake.config.params import DEFAULT_JSON_DECODER, JsonDecoder
from eventlake.connectors.delta import DeltaInput, DeltaOutput, ensure_delta_table
from eventlake.connectors.kafka import KafkaInput, KafkaOutput, kafka_records
from eventlake.pipelines import Pipeline, PipelineParams, SparkInterval, expect
from eventlake.transforms import first_failure, parse_json, quarantine_rows
from eventlake.transforms.parsing import CORRUPT, INVALID_JSON, NULL_VALUE
from eventlake.transforms.windows import flatten_window, windowed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext


class OrdersParams(PipelineParams):
    topic: str | None = "orders"
    dedup_delay: SparkInterval = Field(default="30 minutes", description="Silver watermark.")
    window_delay: SparkInterval = Field(default="10 minutes", description="Gold watermark.")
    revenue_window: SparkInterval = "1 hour"
    sliding_window: SparkInterval = "1 hour"
    sliding_slide: SparkInterval = "30 minutes"
    high_value_threshold: float = 1000.0
    high_value_topic: str = "high_value_orders"


orders = Pipeline(
    "orders",
    params=OrdersParams,
    description="Kafka orders -> bronze, silver + quarantine -> gold windows, high-value",
)

ORDER_FIELDS = (
    "order_id STRING, user_id STRING, category STRING, region STRING, "
    "amount STRING, event_time STRING"
)
AMOUNT_TYPE = "DECIMAL(18,2)"
#: The trigger of the two hops a reader waits on (an order into silver, a closed hour into
#: gold): a batch starts when the last ends. The other flows run on the pipeline's trigger.
CONTINUOUS = "0 seconds"

# Reasons, in the order they are checked; a record gets the first one it breaks.
MISSING_ORDER_ID = "missing_order_id"
MISSING_EVENT_TIME = "missing_event_time"
INVALID_EVENT_TIME = "invalid_event_time"
INVALID_AMOUNT = "invalid_amount"
EMPTY_CATEGORY = "empty_category"
REASONS = (
    NULL_VALUE,
    INVALID_JSON,
    MISSING_ORDER_ID,
    MISSING_EVENT_TIME,
    INVALID_EVENT_TIME,
    INVALID_AMOUNT,
    EMPTY_CATEGORY,
)


def checked_orders(bronze: DataFrame, decoder: JsonDecoder = DEFAULT_JSON_DECODER) -> DataFrame:
    """Bronze rows with the typed order fields and ``reason`` (null when valid)."""
    from pyspark.sql import functions as F

    parsed = parse_json(bronze, ORDER_FIELDS, decoder=decoder, once=True)
    d = F.col("data")
    amount = F.expr(f"try_cast(data.amount AS {AMOUNT_TYPE})")
    event_time = F.expr("try_to_timestamp(data.event_time)")
    reason = first_failure(
        [
            (NULL_VALUE, F.col("value").isNull()),
            (INVALID_JSON, d.isNull() | d[CORRUPT].isNotNull()),
            (MISSING_ORDER_ID, F.coalesce(F.trim(d["order_id"]), F.lit("")) == ""),
            (MISSING_EVENT_TIME, d["event_time"].isNull()),
            (INVALID_EVENT_TIME, event_time.isNull()),
            (INVALID_AMOUNT, amount.isNull() | (amount < 0)),
            (EMPTY_CATEGORY, F.coalesce(F.trim(d["category"]), F.lit("")) == ""),
        ]
    )
    return parsed.select(
        "*",
        amount.alias("amount_typed"),
        event_time.alias("event_time_typed"),
        reason.alias("reason"),
    )


@orders.flow(input=KafkaInput(), output=DeltaOutput("bronze", "orders"))
def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Every Kafka record as received."""
    return kafka_records(df)


def valid_orders(ctx: FlowContext, records: DataFrame) -> DataFrame:
    """The valid orders of bronze-shaped ``records``, typed, de-duplicated by order_id
    within the dedup watermark."""
    from pyspark.sql import functions as F

    p = ctx.typed(OrdersParams)
    valid = checked_orders(records, ctx.params.json_decoder).where(F.col("reason").isNull())
    typed = valid.select(
        F.col("data.order_id").alias("order_id"),
        F.col("data.user_id").alias("user_id"),
        F.col("data.category").alias("category"),
        F.col("data.region").alias("region"),
        F.col("amount_typed").alias("amount"),
        F.col("event_time_typed").alias("event_time"),
        "topic",
        "partition",
        "offset",
    )
    return ctx.with_watermark(typed, "event_time", p.dedup_delay).dropDuplicatesWithinWatermark(
        ["order_id"]
    )


@orders.flow(input=KafkaInput(), output=DeltaOutput("silver", "orders"), trigger=CONTINUOUS)
@expect("has_order_id", "trim(order_id) <> ''", on_violation="fail")
@expect("has_event_time", "event_time IS NOT NULL", on_violation="fail")
@expect("amount_not_negative", "amount >= 0", on_violation="fail")
def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Valid orders from the topic, typed, de-duplicated by order_id within the dedup
    watermark.

    The expectations are its invariants: ``checked_orders`` sends records that break them
    to the quarantine with a reason; should one ever get through, the flow stops.
    """
    return valid_orders(ctx, kafka_records(df))


@orders.flow(
    input=DeltaInput("bronze", "orders"), output=DeltaOutput("silver", "orders_quarantine")
)
def quarantine(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Records that are not valid orders: raw value, Kafka coordinates, reason."""
    return quarantine_rows(checked_orders(df, ctx.params.json_decoder))


@orders.flow(
    input=DeltaInput("silver", "orders"),
    output=DeltaOutput("gold", "revenue_hourly"),
    trigger=CONTINUOUS,
)
def revenue_hourly(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Orders and revenue per category and tumbling window; each window written once."""
    from pyspark.sql import functions as F

    p = ctx.typed(OrdersParams)
    revenue = windowed(ctx, df, "event_time", p.window_delay, p.revenue_window, "category").agg(
        F.count("*").alias("order_count"), F.sum("amount").alias("total_amount")
    )
    return flatten_window(revenue)


@orders.flow(
    input=DeltaInput("silver", "orders"),
    output=DeltaOutput("gold", "category_orders_sliding"),
)
def category_sliding(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Orders per category and sliding window; each window written once."""
    from pyspark.sql import functions as F

    p = ctx.typed(OrdersParams)
    window, slide = p.sliding_window, p.sliding_slide
    counts = windowed(ctx, df, "event_time", p.window_delay, window, "category", slide=slide)
    return flatten_window(counts.agg(F.count("*").alias("order_count")))


@orders.flow(input=DeltaInput("silver", "orders"), output=KafkaOutput("high_value_topic"))
def high_value(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Orders above the threshold, as JSON keyed by order_id (at-least-once)."""
    from pyspark.sql import functions as F

    p = ctx.typed(OrdersParams)
    big = df.where(F.col("amount") > F.lit(p.high_value_threshold))
    payload = F.struct(
        "order_id",
        "user_id",
        "category",
        "region",
        F.col("amount").cast("double").alias("amount"),
        F.date_format("event_time", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("event_time"),
    )
    return big.select(F.col("order_id").alias("key"), F.to_json(payload).alias("value"))


CATEGORIES_DDL = "category STRING, department STRING, margin_rate DOUBLE"


def categories(ctx: FlowContext) -> DataFrame:
    """The dimension table reference/categories, created empty when missing.

    A batch read of a Delta table inside a streaming plan is resolved again for every
    micro-batch, so each batch joins the table's newest version.
    """
    path = ctx.table_path("reference", "categories")
    ensure_delta_table(ctx.spark, path, CATEGORIES_DDL)
    return ctx.spark.read.format("delta").load(str(path))


@orders.flow(input=DeltaInput("silver", "orders"), output=DeltaOutput("gold", "orders_enriched"))
def enriched(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Orders with their category's department and margin (stream-static join)."""
    from pyspark.sql import functions as F

    dims = categories(ctx)
    joined = df.join(dims, "category", "left")
    return joined.select(
        "order_id",
        "user_id",
        "category",
        "department",
        "amount",
        (F.col("amount") * F.col("margin_rate")).cast("decimal(18,2)").alias("margin"),
        "event_time",
    )
