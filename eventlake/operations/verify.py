"""``eventlake verify PIPELINE.FLOW``: recompute a flow's output in batch and diff it.

The flow's transform runs once on a batch read of its input up to where its last committed
batch ended (the checkpoint's offsets log): a Kafka topic up to the batch's end offsets, or
a Delta table (a medallion's silver or gold flow) through the files the batches read, by
table version and file position (:mod:`eventlake.connectors.delta.replay`). Rows Spark's
stateful operators dropped as late are left out the way Spark did it: a row read by batch
N (by its Kafka partition and offset, or the Delta file it came from) is late when its
event time is at or behind the watermark of batch N-1 (both from the log); in an
aggregation by a tumbling window, when its window ends there, and by a session window,
when its event time plus the gap does (Spark judges the window or session). Windowed
results are compared for the windows the watermark closed by the last batch (``window``
struct, ``window_end`` or ``end`` column at or before it); other results whole. What is
left is a multiset diff of that result and the flow's output table: rows missing from the
output and rows the output has that the transform does not produce.

Limits: flows with one input (Kafka rows keep ``partition`` and ``offset`` up to the
watermark, Delta rows every column the source has); no sliding window; a Delta input read
as appends (no change feed, no skipped change commits) from its snapshot or an int
``starting_version``, whose log still holds those versions. The output table is read as it
is now, so verify a stopped flow (or rows written after the last committed batch count as
extra).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from eventlake.checkpoints import CheckpointLog
from eventlake.config import Settings
from eventlake.connectors.base import REPLAYED_BATCH
from eventlake.context import FlowContext
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.expectations import FAILED, apply_expectations
from eventlake.watermarks import (
    LATE,
    NO_WATERMARK,
    WINDOW,
    WatermarkCall,
    WatermarkRecorder,
    flag_late,
    late_threshold_ms,
    sliding,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eventlake.context import FlowConfig
    from eventlake.pipelines.api import FlowSpec, Pipeline


@dataclass(frozen=True)
class Verification:
    flow: str
    batch_id: int
    #: The watermark of the last committed batch (ISO, UTC), None without one.
    watermark: str | None
    expected_rows: int
    output_rows: int
    late_rows: int
    #: The first rows (as dicts) the transform produces that the output lacks, and the
    #: first the output holds that the transform does not produce.
    missing: list[dict[str, Any]] = field(default_factory=list)
    unexpected: list[dict[str, Any]] = field(default_factory=list)
    missing_count: int = 0
    unexpected_count: int = 0

    @property
    def ok(self) -> bool:
        return self.missing_count == 0 and self.unexpected_count == 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _refused(flow: str, what: str, fix: str) -> EventlakeError:
    return EventlakeError(
        ErrorCode.PIPELINE_INVALID,
        f"flow '{flow}' cannot be verified: {what}.",
        expected="a flow with one Kafka input, a committed batch and a Delta output table",
        fix=fix,
    )


def verify_flow(
    pipeline: Pipeline, flow: str, settings: Settings, spark: SparkSession, *, rows: int = 10
) -> Verification:
    """Recompute ``flow``'s result up to its last committed batch and diff the output."""
    from pyspark.sql import functions as F

    spec = pipeline.flows[flow]
    config = pipeline.configs(settings)[flow]
    name = spec.query_name
    if spec.inputs or not spec.input.capabilities.verify:
        raise _refused(name, f"it reads {spec.describe_inputs(config)}",
                       "verify flows that read one input whose batches it can replay by "
                       "offsets (Kafka, Delta)")  # fmt: skip
    tables = spec.output.tables()
    if len(tables) != 1:
        raise _refused(name, f"it writes {spec.output.describe(config)}",
                       "verify flows that write one Delta table")  # fmt: skip
    log = CheckpointLog(config.checkpoint)
    last = log.last_committed
    if last is None:
        raise EventlakeError(
            ErrorCode.CHECKPOINT_MISSING,
            f"flow '{name}' has no committed batch in {config.checkpoint}.",
            fix=f"run it first: eventlake run {spec.pipeline}",
        )
    ctx = FlowContext.of(config, spark, trigger="available-now")
    try:
        source = spec.input.replay(ctx, log, last)
    except NotImplementedError as exc:
        fix = "verify flows whose input replays from its checkpoint's offsets"
        raise _refused(name, f"its input cannot be replayed: {exc}", fix) from None
    # A Kafka input's rows are judged by partition and offset against each batch's ranges;
    # a replayed Delta input's by the batch that read them (REPLAYED_BATCH).
    by_batch = REPLAYED_BATCH in source.columns
    if by_batch:
        thresholds = spark.createDataFrame(
            [(n, log.watermark_ms(n - 1) if n > 0 else NO_WATERMARK) for n in range(last + 1)],
            f"{REPLAYED_BATCH} INT, _threshold LONG",
        )
    else:
        batches = _batch_ranges(log, last)
    late_counts: list[DataFrame] = []
    _batch_transform(spec, ctx, source)  # how the watermarked rows are grouped, if they are
    calls = ctx.watermarks.calls
    if not calls and _watermarked_outside_the_context(spec, config, spark):
        raise _refused(name, "its watermark is set with DataFrame.withWatermark, so the late "
                       "rows Spark dropped cannot be judged",
                       "declare it with ctx.with_watermark (or eventlake's windowed or "
                       "deduplicated_events)")  # fmt: skip
    marks = iter(calls)  # the same watermarks, in the same order, below
    if any(sliding(m) for m in calls):
        what = ("it aggregates by a sliding window (Spark drops a late row from the closed "
                "windows only, which no row filter can replay)")  # fmt: skip
        raise _refused(name, what, "verify flows with tumbling, session or no windows")

    def on_time(df: DataFrame, column: str, delay: str) -> DataFrame:
        kafka_keys: list[str] = [c for c in ("topic", "partition", "offset") if c in df.columns]
        positioned = {"partition", "offset"} <= set(kafka_keys)
        if not by_batch and positioned:
            judged = _judged(spark, df, batches)
        elif by_batch and REPLAYED_BATCH in df.columns:
            judged = df.join(F.broadcast(thresholds), REPLAYED_BATCH, "left")
        elif by_batch and positioned:
            # Bronze's Kafka coordinates survived where the batch column did not: each
            # names one upstream row, and so the batch that read it.
            read_by = source.select(*kafka_keys, REPLAYED_BATCH).dropDuplicates(kafka_keys)
            judged = (
                df.join(read_by, kafka_keys, "left")
                .join(F.broadcast(thresholds), REPLAYED_BATCH, "left")
                .drop(REPLAYED_BATCH)
            )
        else:
            keep = f"keep `{REPLAYED_BATCH}`" if by_batch else "keep `partition` and `offset`"
            raise _refused(name, "its rows lose what tells which batch read them before "
                           "the watermark", f"{keep} up to ctx.with_watermark")  # fmt: skip
        mark = next(marks, None) or WatermarkCall(df, column, delay, df)
        flagged = flag_late(mark, judged, F.col("_threshold"), name)
        flagged = flagged.drop(WINDOW, "_threshold")
        late_counts.append(flagged.where(F.col(LATE)))
        return flagged.where(~F.col(LATE)).drop(LATE)

    judging = FlowContext.of(
        config, spark, trigger="available-now", watermarks=WatermarkRecorder(rewrite=on_time)
    )
    expected = _batch_transform(spec, judging, source)
    expected = apply_expectations(expected, spec.expectations).drop(REPLAYED_BATCH)
    if FAILED in expected.columns:  # quarantined rows go to another table
        expected = expected.where(F.size(FAILED) == 0).drop(FAILED)
    watermark_ms = log.watermark_ms(last)
    expected = _closed(expected, watermark_ms)
    layer, table = tables[0]
    output = spark.read.format("delta").load(str(config.table_path(layer, table)))
    columns = [c for c in expected.columns if c in output.columns]
    expected, output = expected.select(*columns), output.select(*columns)
    missing = expected.exceptAll(output)
    unexpected = output.exceptAll(expected)
    return Verification(
        flow=name,
        batch_id=last,
        watermark=_iso(watermark_ms),
        expected_rows=expected.count(),
        output_rows=output.count(),
        late_rows=sum(d.count() for d in late_counts),
        missing=[r.asDict(recursive=True) for r in missing.limit(rows).collect()],
        unexpected=[r.asDict(recursive=True) for r in unexpected.limit(rows).collect()],
        missing_count=missing.count(),
        unexpected_count=unexpected.count(),
    )


#: Logical plan nodes Spark refuses in a batch query, with the call that makes them.
STREAM_ONLY = {"DeduplicateWithinWatermark": "dropDuplicatesWithinWatermark"}


def _batch_transform(spec: FlowSpec, ctx: FlowContext, source: DataFrame) -> DataFrame:
    """The flow's transform on the batch ``source``; refused (EL-PIPELINE-002) when it
    uses an operator Spark runs on streams only."""
    from eventlake.pipelines.plan_tree import analysed_tree

    result: DataFrame = spec.transform(ctx, source)
    found = analysed_tree(result).find(*STREAM_ONLY)
    if found:
        fix = "verify the flows downstream of it, which read what it wrote"
        raise _refused(spec.query_name, f"its transform uses {STREAM_ONLY[found[0].name]}, "
                       "which Spark runs on streams only", fix)  # fmt: skip
    return result


def _watermarked_outside_the_context(
    spec: FlowSpec, config: FlowConfig, spark: SparkSession
) -> bool:
    """Whether the flow's streaming plan holds a watermark its context did not record (a
    batch plan drops watermarks, so the flow is built on a stream to look)."""
    from eventlake.pipelines.plan_tree import analysed_tree

    ctx = FlowContext.of(config, spark, trigger="available-now", sources=(spec.input,))
    built = spec.transform(ctx, spec.input.read(ctx))
    return bool(analysed_tree(built).find("EventTimeWatermark")) and not ctx.watermarks.calls


def _iso(ms: int) -> str | None:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat() if ms > 0 else None


def _batch_ranges(log: CheckpointLog, last: int) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, first offset, end offset, late threshold ms) per batch up to
    ``last``: a row of batch N is judged against the watermark of batch N-1
    (:func:`eventlake.watermarks.late_threshold_ms`)."""
    reads = log.batch_reads(0, through=last)
    return [
        (topic, partition, first, end, late_threshold_ms(reads, n))
        for n, read in enumerate(reads)
        for (topic, partition), (first, end) in read.ranges.items()
    ]


def _judged(
    spark: SparkSession, df: DataFrame, batches: list[tuple[str, int, int, int, int]]
) -> DataFrame:
    """``df`` with ``_threshold``: the late-events watermark (epoch ms) of its row's batch."""
    from pyspark.sql import functions as F

    ranges = spark.createDataFrame(
        batches, "_topic STRING, _partition INT, _first LONG, _end LONG, _threshold LONG"
    )
    on = (
        (F.col("partition") == F.col("_partition"))
        & (F.col("offset") >= F.col("_first"))
        & (F.col("offset") < F.col("_end"))
    )
    if "topic" in df.columns:
        on = on & (F.col("topic") == F.col("_topic"))
    joined = df.join(F.broadcast(ranges), on, "left")
    threshold = F.coalesce(F.col("_threshold"), F.lit(NO_WATERMARK))
    return joined.withColumn("_threshold", threshold).drop("_topic", "_partition", "_first",
                                                           "_end")  # fmt: skip


def _closed(df: DataFrame, watermark_ms: int) -> DataFrame:
    """The rows of windows the watermark closed, when the result has a window end."""
    from pyspark.sql import functions as F

    cols = set(df.columns)
    end = None
    if "window" in cols:
        end = F.col("window.end")
    elif "window_end" in cols:
        end = F.col("window_end")
    elif "end" in cols:
        end = F.col("end")
    if end is None:
        return df
    return df.where(F.unix_millis(end) <= F.lit(watermark_ms))
