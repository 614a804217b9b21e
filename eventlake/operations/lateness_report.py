"""How late a flow's input arrives, and the watermark delay that would keep it.

The flow's transform is run once on batch reads of its inputs, and the DataFrame each
watermark it declares (``ctx.with_watermark``) receives is taken as it stands. For every
record, lateness is how far its event time lies behind the newest event time seen before
it in arrival order (Kafka timestamp, then partition and offset). Spark drops a record
whose lateness exceeds the delay (it is behind the watermark), so the 99% quantile of
lateness is the smallest delay that would have kept 99% of records.
"""

from __future__ import annotations

import itertools
import math
import threading
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from eventlake.config import Settings
from eventlake.context import FlowContext
from eventlake.durations import duration_ms
from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eventlake.pipelines.api import Pipeline

#: Histogram bucket upper bounds, seconds (the last bucket is open).
BUCKETS = (0.0, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999}


@dataclass(frozen=True)
class Lateness:
    flow: str
    column: str
    records: int
    #: Quantiles of lateness in seconds (p50, p90, p99, p99.9, max).
    quantiles: dict[str, float]
    #: The smallest delays (seconds) that would have kept 99% and 99.9% of records.
    keep_99: float
    keep_99_9: float
    configured_delay: str
    configured_seconds: float
    #: Records the configured delay drops, and their share of all records.
    dropped: int
    drop_rate: float
    #: (upper bound in seconds, None for the open last bucket; records).
    histogram: list[tuple[float | None, int]]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _unavailable(flow: str, what: str) -> EventlakeError:
    return EventlakeError(ErrorCode.LATENESS_UNAVAILABLE, f"flow '{flow}': {what}")


def watermarked_inputs(
    pipeline: Pipeline, flow: str, settings: Settings, spark: SparkSession
) -> list[tuple[DataFrame, str, str]]:
    """(DataFrame before the watermark, event-time column, delay) for each watermark the
    flow declares, over everything its inputs hold now."""

    spec = pipeline.flows[flow]
    config = pipeline.configs(settings)[flow]
    query = spec.query_name
    try:
        bare = FlowContext.of(config, spark, trigger="available-now")
        streams = {role: i.read_batch(bare) for role, i in spec.inputs}
        ctx = FlowContext.of(config, spark, streams, "available-now")
        first = spec.input.read_batch(ctx)
    except NotImplementedError as exc:
        raise _unavailable(query, f"its input cannot be read as a batch ({exc}).") from None
    try:
        spec.transform(ctx, first)
    except Exception:  # beyond the watermark some operators refuse batch input
        if not ctx.watermarks.calls:
            raise
    calls = ctx.watermarks.calls
    if not calls:
        raise _unavailable(
            query,
            "it declares no event-time watermark with ctx.with_watermark (or eventlake's "
            "windowed/deduplicated_events).",
        )
    return [(c.before, c.column, c.delay) for c in calls]


def _arrival(df: DataFrame, flow: FlowContext) -> DataFrame:
    """``df`` with ``_arrival`` (Kafka timestamp), ``partition`` and ``offset``."""
    from pyspark.sql import functions as F

    cols = set(df.columns)
    if not {"partition", "offset"} <= cols:
        raise _unavailable(
            flow.query_name,
            "the watermarked rows carry no Kafka partition and offset, so their arrival "
            "order is unknown; keep `partition` and `offset` up to the watermark.",
        )
    for ts in ("kafka_timestamp", "timestamp"):
        if ts in cols:
            return df.withColumn("_arrival", F.col(ts))
    topics = [r[0] for r in df.select("topic").distinct().collect()] if "topic" in cols else []
    topics = topics or [flow.topic()]
    raw = (
        flow.spark.read.format("kafka")
        .options(**flow.settings.kafka.spark_options())
        .option("subscribe", ",".join(topics))
        .load()
        .select("topic", "partition", "offset", F.col("timestamp").alias("_arrival"))
    )
    keys = ["topic", "partition", "offset"] if "topic" in cols else ["partition", "offset"]
    return df.join(raw, keys, "left")


def measure_lateness(
    pipeline: Pipeline,
    flow: str,
    settings: Settings,
    spark: SparkSession,
    *,
    max_rows: int | None = None,
    timeout: float | None = None,
) -> list[Lateness]:
    """The lateness of ``flow``'s input, one record per watermark it declares: over the
    newest ``max_rows`` records by arrival (None: all), its Spark jobs cancelled after
    ``timeout`` seconds (EL-LATENESS-003)."""
    from pyspark.sql import functions as F

    ctx = FlowContext.of(pipeline.configs(settings)[flow], spark)
    results = []
    group = f"eventlake-lateness-{uuid.uuid4().hex[:8]}"
    sc = spark.sparkContext
    sc.setJobGroup(group, f"lateness of {ctx.query_name}", interruptOnCancel=True)

    def cancel() -> None:  # the group's running jobs and any it starts later
        sc._jsc.sc().cancelJobGroupAndFutureJobs(group, "metrics.lateness_timeout passed")

    timer = threading.Timer(timeout, cancel) if timeout else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        for df, column, delay in watermarked_inputs(pipeline, flow, settings, spark):
            rows = (
                _arrival(df, ctx)
                .where(F.col(column).isNotNull())
                .select(
                    (F.unix_micros(F.col(column)) / 1e6).alias("t"),
                    F.coalesce(F.unix_micros("_arrival"), F.lit(0)).alias("a"),
                    "partition",
                    "offset",
                )
            )
            if max_rows is not None:
                rows = rows.orderBy(F.col("a").desc(), F.col("offset").desc()).limit(max_rows)
            results.append(lateness_of(rows.toPandas(), ctx.query_name, column, delay))
    except Exception:
        if timer is not None and not timer.is_alive():
            raise EventlakeError(
                ErrorCode.LATENESS_TIMEOUT,
                f"measuring the lateness of '{ctx.query_name}' took over {timeout:.0f} s; "
                "its Spark jobs were cancelled.",
            ) from None
        raise
    finally:
        if timer is not None:
            timer.cancel()
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return results


def lateness_of(rows: Any, flow: str, column: str, delay: str) -> Lateness:
    """Lateness from a pandas frame of event time ``t`` (seconds) and arrival order
    ``a``, ``partition``, ``offset``."""
    import numpy as np

    ordered = rows.sort_values(["a", "partition", "offset"], kind="stable")
    times = ordered["t"].to_numpy(dtype=float)
    newest_before = np.maximum.accumulate(times)
    newest_before = np.concatenate(([-np.inf], newest_before[:-1])) if len(times) else times
    late = np.clip(newest_before - times, 0.0, None) if len(times) else times
    configured = duration_ms(delay) / 1000.0
    dropped = int((late > configured).sum())
    n = len(late)

    def q(p: float) -> float:
        return float(np.quantile(late, p, method="higher")) if n else 0.0

    quantiles = {name: round(q(p), 3) for name, p in QUANTILES.items()}
    quantiles["max"] = round(float(late.max()) if n else 0.0, 3)
    histogram: list[tuple[float | None, int]] = [(0.0, int((late <= 0).sum()))]
    for lo, hi in itertools.pairwise([*BUCKETS, math.inf]):
        count = int(((late > lo) & (late <= hi)).sum())
        histogram.append((None if math.isinf(hi) else float(hi), count))
    return Lateness(
        flow=flow,
        column=column,
        records=n,
        quantiles=quantiles,
        keep_99=math.ceil(q(0.99)),
        keep_99_9=math.ceil(q(0.999)),
        configured_delay=delay,
        configured_seconds=configured,
        dropped=dropped,
        drop_rate=dropped / n if n else 0.0,
        histogram=histogram,
    )
