"""The ads pipeline: impressions and clicks -> silver (typed, de-duplicated) -> click
attribution (stream-stream inner join), impression outcomes (left outer join) -> hourly
click-through rate.

Inputs: JSON impressions ``impression_id``, ``user_id``, ``ad_id``, ``impression_time``
(``topics.impressions``) and clicks ``click_id``, ``user_id``, ``ad_id``, ``click_time``
(``topics.clicks``).

- ``impressions`` / ``clicks``: valid events, de-duplicated by id within the watermark
  (silver/ad_impressions, silver/ad_clicks). Events at or behind the watermark when
  processed are dropped here.
- ``quarantine``: invalid records of both topics (silver/ads_quarantine).
- ``attributed``: a click matches an impression of the same user and ad when
  ``impression_time <= click_time <= impression_time + attribution_window``
  (silver/ad_clicks_attributed), written as soon as both sides are seen.
- ``outcome``: every impression with its matching click, or with nulls once the
  watermark has passed the end of its attribution window (silver/ad_impressions_outcome).
- ``ctr_hourly``: per ``ad_id`` and window of impression time: impressions, clicks,
  unique users and CTR, from the outcomes (gold/ad_ctr_hourly).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from eventlake.connectors.delta import DeltaInput, DeltaOutput
from eventlake.connectors.kafka import KafkaInput, kafka_records
from eventlake.durations import duration_ms
from eventlake.pipelines import Pipeline, PipelineParams, SparkInterval
from eventlake.transforms import checked_events, deduplicated_events, quarantine_rows
from eventlake.transforms.windows import flatten_window, windowed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext


class AdsParams(PipelineParams):
    topics: dict[str, str] = Field(
        default_factory=lambda: {"impressions": "impressions", "clicks": "ad_clicks"}
    )
    watermark: SparkInterval = Field(default="10 minutes", description="Both inputs.")
    attribution_window: SparkInterval = Field(
        default="5 minutes", description="How long after an impression a click counts."
    )
    ctr_window: SparkInterval = "1 hour"
    ctr_watermark: SparkInterval = Field(
        default="30 minutes",
        description="Outcomes arrive up to watermark + attribution window behind the newest "
        "impression; this must exceed that.",
    )

    @model_validator(mode="after")
    def _ctr_watermark_covers_outcomes(self) -> AdsParams:
        needed = duration_ms(self.watermark) + duration_ms(self.attribution_window)
        if duration_ms(self.ctr_watermark) <= needed:
            raise ValueError(
                f"ctr_watermark ({self.ctr_watermark}) must exceed watermark ({self.watermark})"
                f" + attribution_window ({self.attribution_window}): an impression without a "
                "click reaches the outcomes that far behind the newest impression, and "
                "ctr_hourly would drop it as late"
            )
        return self


ads = Pipeline(
    "ads",
    params=AdsParams,
    description="Kafka impressions + clicks -> attribution joins -> hourly CTR",
)

IMPRESSION_FIELDS = {
    "impression_id": "string",
    "user_id": "string",
    "ad_id": "string",
    "impression_time": "timestamp",
}
CLICK_FIELDS = {
    "click_id": "string",
    "user_id": "string",
    "ad_id": "string",
    "click_time": "timestamp",
}


def _deduplicated(ctx: FlowContext, df: DataFrame, fields: dict[str, str]) -> DataFrame:
    p = ctx.typed(AdsParams)
    key, *_, time = fields
    records = kafka_records(df)
    return deduplicated_events(
        ctx, records, fields, time=time, keys=[key], delay=p.watermark, decoder=p.json_decoder
    )


@ads.flow(input=KafkaInput("impressions"), output=DeltaOutput("silver", "ad_impressions"))
def impressions(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Valid impressions, de-duplicated by impression_id within the watermark."""
    return _deduplicated(ctx, df, IMPRESSION_FIELDS)


@ads.flow(input=KafkaInput("clicks"), output=DeltaOutput("silver", "ad_clicks"))
def clicks(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Valid clicks, de-duplicated by click_id within the watermark."""
    return _deduplicated(ctx, df, CLICK_FIELDS)


@ads.flow(
    input=KafkaInput("impressions"),
    inputs={"clicks": KafkaInput("clicks")},
    output=DeltaOutput("silver", "ads_quarantine"),
)
def quarantine(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Invalid impressions and clicks: raw value, Kafka coordinates, reason."""
    decoder = ctx.params.json_decoder
    impressions = checked_events(kafka_records(df), IMPRESSION_FIELDS, decoder=decoder)
    clicks = checked_events(kafka_records(ctx.stream("clicks")), CLICK_FIELDS, decoder=decoder)
    bad_impressions, bad_clicks = quarantine_rows(impressions), quarantine_rows(clicks)
    return bad_impressions.unionByName(bad_clicks)


def _joined(ctx: FlowContext, impressions: DataFrame, how: str) -> DataFrame:
    from pyspark.sql import functions as F

    p = ctx.typed(AdsParams)
    i = ctx.with_watermark(impressions, "impression_time", p.watermark).alias("i")
    c = ctx.with_watermark(ctx.stream("clicks"), "click_time", p.watermark).alias("c")
    condition = F.expr(
        "i.user_id = c.user_id AND i.ad_id = c.ad_id "
        "AND c.click_time >= i.impression_time "
        f"AND c.click_time <= i.impression_time + INTERVAL {p.attribution_window}"
    )
    return i.join(c, condition, how).select(
        "i.impression_id",
        "i.user_id",
        "i.ad_id",
        "i.impression_time",
        "c.click_id",
        "c.click_time",
    )


@ads.flow(
    input=DeltaInput("silver", "ad_impressions"),
    inputs={"clicks": DeltaInput("silver", "ad_clicks")},
    output=DeltaOutput("silver", "ad_clicks_attributed"),
)
def attributed(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Clicks matched to an impression of the same user and ad within the window."""
    return _joined(ctx, df, "inner").select(
        "click_id", "impression_id", "user_id", "ad_id", "impression_time", "click_time"
    )


@ads.flow(
    input=DeltaInput("silver", "ad_impressions"),
    inputs={"clicks": DeltaInput("silver", "ad_clicks")},
    output=DeltaOutput("silver", "ad_impressions_outcome"),
)
def outcome(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Every impression with its click, or with nulls once its window has closed."""
    return _joined(ctx, df, "left_outer")


@ads.flow(
    input=DeltaInput("silver", "ad_impressions_outcome"),
    output=DeltaOutput("gold", "ad_ctr_hourly"),
)
def ctr_hourly(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Impressions, clicks, unique users and CTR per ad and hour of impression time."""
    from pyspark.sql import functions as F

    p = ctx.typed(AdsParams)
    hourly = (
        windowed(ctx, df, "impression_time", p.ctr_watermark, p.ctr_window, "ad_id")
        .agg(
            F.size(F.collect_set("impression_id")).alias("impressions"),
            F.size(F.collect_set("click_id")).alias("clicks"),
            F.size(F.collect_set("user_id")).alias("unique_users"),
        )
        .withColumn("ctr", F.col("clicks") / F.col("impressions"))
    )
    return flatten_window(hourly)
