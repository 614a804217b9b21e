"""Idle sources: heartbeats that move a flow's watermark when its Kafka input goes quiet.

With ``pipelines.<p>.idle_timeout`` set, :meth:`FlowContext.with_watermark
<eventlake.context.FlowContext.with_watermark>` unions the flow's rows with a heartbeat
stream before the watermark and removes the heartbeats right after it, so they move the
watermark and nothing else. The run's :class:`IdleWatch` (a service of the run, in the
driver's process) decides, once a second, whether the input is idle: the flow has read
records before (its watermark is set), has processed every record of its topics (its
last committed batch reached their ends) and the newest record is older than
``idle_timeout``. It writes that answer to a file on the driver's host, which the
heartbeat source (:class:`HeartbeatSource`, a Python data source whose reader runs on the
driver) reads at each trigger: one heartbeat row, at the clock's time, per batch while
idle. So nothing runs on executors, the checkpoint may be on any filesystem, and nothing is
written to or committed on the user's topics.

Kafka inputs only; micro-batch triggers (available-now too, so a scheduled run resumes an
interval run's checkpoint). The heartbeat adds a source to the query, so switching
``idle_timeout`` on or off needs a new checkpoint (``upgrade-check`` says so).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from eventlake.durations import utc_instant

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eventlake.config import KafkaSettings

log = logging.getLogger(__name__)

#: Marks heartbeat rows between the union and the filter after the watermark.
HEARTBEAT = "_eventlake_heartbeat"
#: How often the watch probes each flow's input (seconds).
PROBE_SECONDS = 1.0
#: An answer older than this (seconds) is no answer: a run that died sends no heartbeat.
STALE_SECONDS = 10.0
#: The heartbeat source's name for ``spark.readStream.format``.
SOURCE = "eventlake_heartbeat"


def idle_seconds(kafka: KafkaSettings, topics: list[str], checkpoint: str) -> float | None:
    """Seconds since the newest record of ``topics`` arrived, when the flow whose
    checkpoint is ``checkpoint`` has processed all of them; None while it has not, has no
    committed batch, or has never read a record (its watermark is unset: a clock-driven
    watermark would make a backlog produced later entirely late)."""
    from confluent_kafka import TopicPartition

    from eventlake.checkpoints import CheckpointLog
    from eventlake.monitoring.lag import kafka_lag, parse_kafka_offsets, record_timestamps
    from eventlake.storage import Location

    flow_log = CheckpointLog(Location(checkpoint))
    last = flow_log.last_committed
    if last is None:
        return None
    entry = flow_log.entry(last)
    if entry.watermark_ms <= 0:
        return None
    processed: dict[str, dict[int, int]] = {}
    for source in entry.sources:
        processed.update(parse_kafka_offsets(source))
    lags = kafka_lag(kafka, topics, processed, timeout=5.0)
    if not lags or any(lag.records for lag in lags):
        return None
    newest = [TopicPartition(g.topic, g.partition, g.latest - 1) for g in lags if g.latest > 0]
    stamps = record_timestamps(kafka, newest, 5.0)
    return time.time() - max(stamps.values()) if stamps else None


class HeartbeatReader(SimpleDataSourceStreamReader):
    """Reads the watch's answer at each trigger (on the driver): one row, now, while idle.
    Offsets count the heartbeats and keep each one's time, so a replayed batch reads the
    same row."""

    def __init__(self, signal: str) -> None:
        self.signal = signal

    def initialOffset(self) -> dict[str, int]:
        return {"beats": 0, "at_ms": 0}

    def _idle(self) -> bool:
        try:
            answer = json.loads(Path(self.signal).read_text())
        except (OSError, ValueError):
            return False
        fresh = time.time() - float(answer.get("written", 0)) < STALE_SECONDS
        return bool(answer.get("idle")) and fresh

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        if not self._idle():
            return iter(()), start
        now_ms = int(time.time() * 1000)
        end = {"beats": int(start["beats"]) + 1, "at_ms": now_ms}
        return iter([(utc_instant(now_ms),)]), end

    def readBetweenOffsets(
        self, start: dict[str, int], end: dict[str, int]
    ) -> Iterator[tuple[Any, ...]]:
        if int(end["beats"]) == int(start["beats"]):
            return iter(())
        return iter([(utc_instant(int(end["at_ms"])),)])


class HeartbeatSource(DataSource):
    """``spark.readStream.format("eventlake_heartbeat").option("signal", path)``: the
    heartbeat rows of one flow (``timestamp``), read on the driver."""

    @classmethod
    def name(cls) -> str:
        return SOURCE

    def schema(self) -> str:
        return "timestamp TIMESTAMP"

    def simpleStreamReader(self, schema: Any) -> HeartbeatReader:
        return HeartbeatReader(self.options["signal"])


@dataclass
class _Watched:
    kafka: KafkaSettings
    topics: list[str]
    checkpoint: str
    idle_timeout: float
    signal: Path


class IdleWatch:
    """A service of the run: for each flow with ``idle_timeout``, whether its input is
    idle, written once a second to the file its heartbeat source reads. Flows register
    while the plan is built; :meth:`start` (when the run starts) begins the probing."""

    def __init__(self) -> None:
        self._flows: dict[str, _Watched] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._folder = Path(tempfile.gettempdir()) / f"eventlake-idle-{os.getpid()}"
        self._run = uuid.uuid4().hex[:8]

    def watch(
        self, flow: str, kafka: KafkaSettings, topics: list[str], checkpoint: str,
        idle_timeout: float,
    ) -> str:  # fmt: skip
        """Register ``flow``; return the path of its answer file (written once started)."""
        signal = self._folder / f"{self._run}-{flow}.json"
        with self._lock:
            self._flows[flow] = _Watched(kafka, topics, checkpoint, idle_timeout, signal)
        return str(signal)

    def start(self) -> None:
        if self._thread is not None or not self._flows:
            return
        self._folder.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name="eventlake-idle", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                flows = list(self._flows.values())
            for flow in flows:
                self._answer(flow)
            self._stop.wait(PROBE_SECONDS)

    def _answer(self, flow: _Watched) -> None:
        try:
            seconds = idle_seconds(flow.kafka, flow.topics, flow.checkpoint)
            idle = seconds is not None and seconds >= flow.idle_timeout
        except Exception:  # the broker or the checkpoint unreadable now: not idle
            log.debug("idle probe of %s failed", flow.checkpoint, exc_info=True)
            idle = False
        tmp = flow.signal.with_name(f".{flow.signal.name}.tmp")
        tmp.write_text(json.dumps({"idle": idle, "written": time.time()}))
        os.replace(tmp, flow.signal)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for flow in self._flows.values():
            flow.signal.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # absent (never started), or another run's files
            self._folder.rmdir()


def with_heartbeats(
    spark: SparkSession,
    df: DataFrame,
    column: str,
    *,
    signal: str,
) -> DataFrame:
    """``df`` with a :data:`HEARTBEAT` column, unioned with heartbeat rows (every column
    null but ``column``, the clock's time) read from the flow's answer file ``signal``."""
    from pyspark.sql import functions as F

    spark.dataSource.register(HeartbeatSource)
    beats = spark.readStream.format(SOURCE).option("signal", signal).load()
    fields = [
        (F.col("timestamp") if f.name == column else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in df.schema.fields
    ]
    ghosts = beats.select(*fields, F.lit(True).alias(HEARTBEAT))
    return df.withColumn(HEARTBEAT, F.lit(False)).unionByName(ghosts)
