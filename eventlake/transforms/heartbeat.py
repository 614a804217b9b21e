"""Idle sources: heartbeats that move a flow's watermark when its Kafka input goes quiet.

With ``pipelines.<p>.idle_timeout`` set, :meth:`FlowContext.with_watermark
<eventlake.context.FlowContext.with_watermark>` unions the flow's rows with a heartbeat
stream (Spark's rate source, one row a second) before the watermark and removes the
heartbeats right after it, so they move the watermark and nothing else. A heartbeat row
passes only while the input is idle: the flow has processed every record of its topics
(its last committed batch reached their ends) and the newest record is older than
``idle_timeout``. Its event time is the processing-time clock, so the watermark becomes
now minus the delay, and windows and sessions behind it close and are written. Nothing is
written to or committed on the user's topics; the probe reads end offsets and the newest
record's timestamp by assignment.

Kafka inputs only; micro-batch triggers (available-now too, so a scheduled run resumes an
interval run's checkpoint). The heartbeat adds a source to the query, so switching
``idle_timeout`` on or off needs a new checkpoint (``upgrade-check`` says so).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eventlake.config import KafkaSettings

#: Marks heartbeat rows between the union and the filter after the watermark.
HEARTBEAT = "_eventlake_heartbeat"
#: A probe's answer holds this long (seconds) for further heartbeat rows of its task.
PROBE_SECONDS = 1.0


def idle_seconds(kafka: KafkaSettings, topics: list[str], checkpoint: str) -> float | None:
    """Seconds since the newest record of ``topics`` arrived, when the flow whose
    checkpoint is ``checkpoint`` has processed all of them; None while it has not (or has
    no committed batch)."""
    from confluent_kafka import TopicPartition

    from eventlake.checkpoints import CheckpointLog
    from eventlake.monitoring.lag import kafka_lag, parse_kafka_offsets, record_timestamps
    from eventlake.storage import Location

    log = CheckpointLog(Location(checkpoint))
    last = log.last_committed
    if last is None:
        return None
    processed: dict[str, dict[int, int]] = {}
    for source in log.sources(last):
        processed.update(parse_kafka_offsets(source))
    lags = kafka_lag(kafka, topics, processed, timeout=5.0)
    if not lags or any(lag.records for lag in lags):
        return None
    newest = [TopicPartition(g.topic, g.partition, g.latest - 1) for g in lags if g.latest > 0]
    stamps = record_timestamps(kafka, newest, 5.0)
    return time.time() - max(stamps.values()) if stamps else float("inf")


class IdleProbe:
    """Whether a flow's input is idle: the UDF that lets heartbeat rows through. Pickled
    into the task, it holds its last answer for :data:`PROBE_SECONDS`, so a batch with
    many heartbeat rows probes the broker about once a second."""

    def __init__(
        self, kafka: KafkaSettings, topics: list[str], checkpoint: str, idle_timeout: float
    ) -> None:
        self.kafka, self.topics, self.checkpoint = kafka, topics, checkpoint
        self.idle_timeout = idle_timeout
        self._last: tuple[float, bool] | None = None

    def __call__(self, _tick: Any) -> bool:
        now = time.monotonic()
        if self._last is None or now - self._last[0] >= PROBE_SECONDS:
            seconds = idle_seconds(self.kafka, self.topics, self.checkpoint)
            self._last = (now, seconds is not None and seconds >= self.idle_timeout)
        return self._last[1]


def with_heartbeats(
    spark: SparkSession,
    df: DataFrame,
    column: str,
    *,
    idle_timeout: float,
    kafka: KafkaSettings,
    topics: list[str],
    checkpoint: str,
) -> DataFrame:
    """``df`` with a :data:`HEARTBEAT` column, unioned with heartbeat rows (every column
    null but ``column``, the processing time) that pass only while the input is idle."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    from eventlake.errors import ErrorCode, EventlakeError
    from eventlake.storage import Location

    if not Location(checkpoint).is_local:
        # The probe runs in a Python worker, which has no JVM to read a Hadoop filesystem.
        raise EventlakeError(
            ErrorCode.PIPELINE_INVALID,
            f"idle_timeout reads the flow's checkpoint from a Python worker; {checkpoint} "
            "is not a local path.",
            expected="a local checkpoints.root for a pipeline with idle_timeout",
            fix="unset pipelines.<p>.idle_timeout, or keep this pipeline's checkpoints local",
        )

    idle = IdleProbe(kafka, topics, checkpoint, idle_timeout)
    probe = F.udf(idle, BooleanType(), useArrow=False).asNondeterministic()
    beats = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    fields = [
        (F.col("timestamp") if f.name == column else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in df.schema.fields
    ]
    ghosts = beats.where(probe(F.col("value"))).select(*fields, F.lit(True).alias(HEARTBEAT))
    return df.withColumn(HEARTBEAT, F.lit(False)).unionByName(ghosts)
