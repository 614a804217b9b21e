"""A StreamingQueryListener that never blocks Spark: it copies each progress event into a
queue; a daemon thread prints one line per batch and keeps per-flow totals."""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pyspark.sql.streaming.listener import QueryProgressEvent, StreamingQueryListener
from rich.console import Console

from eventlake.monitoring.lag import Offsets, parse_kafka_offsets
from eventlake.monitoring.observed import expectation_counts, observed_counts

log = logging.getLogger(__name__)

#: Queries eventlake starts for itself (late-row replays) have names with this prefix:
#: their progress is neither shown nor counted.
INTERNAL_QUERY_PREFIX = "_eventlake."


@dataclass(frozen=True)
class BatchProgress:
    query: str
    batch_id: int
    input_rows: int
    input_rows_per_second: float
    processed_rows_per_second: float
    batch_duration_ms: int
    watermark: str | None
    state_rows: int
    dropped_by_watermark: int
    #: Per stateful operator: (name, state rows, state memory in bytes).
    operators: tuple[tuple[str, int, int], ...] = ()
    #: When the batch started (Spark's progress timestamp, seconds since the epoch).
    timestamp: float = 0.0
    #: Where the batch ended in each Kafka input: ``{topic: {partition: next offset}}``.
    kafka_offsets: Offsets = field(default_factory=dict)
    #: Rows the flow handed to its output (None when not observed).
    output_rows: int | None = None
    quarantined_rows: int = 0
    #: Per expectation of the flow: (name, rows passed, rows failed).
    expectations: tuple[tuple[str, int, int], ...] = ()
    #: Spark's split of the batch's time (``durationMs``): ``{"addBatch": 812, ...}``.
    phases_ms: dict[str, int] = field(default_factory=dict)

    @property
    def state_bytes(self) -> int:
        return sum(size for _name, _rows, size in self.operators)

    def state_detail(self) -> str:
        """``dedupeWithinWatermark 120 rows/48 KiB, stateStoreSave 30 rows/12 KiB``."""
        return ", ".join(
            f"{name} {rows} rows/{size // 1024} KiB" for name, rows, size in self.operators
        )

    def line(self) -> str:
        return (
            f"[{self.query}] batch {self.batch_id}: {self.input_rows} rows, "
            f"{self.input_rows_per_second:.0f} in/s, {self.processed_rows_per_second:.0f} proc/s, "
            f"{self.batch_duration_ms / 1000:.2f}s, watermark {self.watermark or '-'}, "
            f"state {self.state_rows}"
            + (f" ({self.state_detail()})" if self.operators else "")
            + f", late dropped {self.dropped_by_watermark}"
            + "".join(f", {n} {ok}/{ok + bad}" for n, ok, bad in self.expectations)
        )


@dataclass
class FlowTotals:
    batches: int = 0
    input_rows: int = 0
    dropped_by_watermark: int = 0
    last_batch_id: int | None = None
    state_rows: int = 0
    watermark: str | None = None
    #: The largest state (rows, all operators) any batch of the run ended with.
    peak_state_rows: int = 0
    quarantined_rows: int = 0


def _progress(p: Any) -> BatchProgress:
    ops = list(p.stateOperators or [])
    watermark = (p.eventTime or {}).get("watermark")  # the epoch until the first event
    kafka: Offsets = {}
    for source in p.sources or []:
        kafka.update(parse_kafka_offsets(source.endOffset))
    output, quarantined = observed_counts(p.observedMetrics)
    expectations = expectation_counts(p.observedMetrics)
    return BatchProgress(
        query=p.name or str(p.id),
        batch_id=int(p.batchId),
        input_rows=int(p.numInputRows),
        input_rows_per_second=float(p.inputRowsPerSecond or 0.0),
        processed_rows_per_second=float(p.processedRowsPerSecond or 0.0),
        batch_duration_ms=int(p.batchDuration),
        watermark=None if watermark is None or watermark.startswith("1970") else watermark,
        state_rows=sum(int(op.numRowsTotal) for op in ops),
        dropped_by_watermark=sum(int(op.numRowsDroppedByWatermark) for op in ops),
        operators=tuple(
            (str(op.operatorName), int(op.numRowsTotal), int(op.memoryUsedBytes)) for op in ops
        ),
        timestamp=epoch_seconds(p.timestamp),
        kafka_offsets=kafka,
        output_rows=output,
        quarantined_rows=quarantined,
        expectations=expectations,
        phases_ms={str(k): int(v) for k, v in (p.durationMs or {}).items()},
    )


class _JsonEvents:
    """The JVM's listener interface, implemented for :class:`ProgressListener`: a progress
    event crosses to Python as its JSON, in one call.

    pyspark's own implementation reads the event field by field, and the end of each Java
    map it iterates is an exception that pyspark translates through py4j class lookups,
    each of which searches every jar: with the seven flows of ``orders`` running, about a
    tenth of the driver JVM's CPU. The other events carry nothing ProgressListener reads.
    """

    def __init__(self, listener: ProgressListener) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        pass

    def onQueryProgress(self, jevent: Any) -> None:
        with contextlib.suppress(Exception):  # a listener must never fail the query's thread
            progress = json.loads(jevent.progress().json())
            self.listener.onQueryProgress(QueryProgressEvent.fromJson({"progress": progress}))

    def onQueryIdle(self, jevent: Any) -> None:
        pass

    def onQueryTerminated(self, jevent: Any) -> None:
        pass

    class Java:
        implements: ClassVar = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def epoch_seconds(text: str | None) -> float:
    """Spark's ``2026-11-23T12:15:02.038Z`` as seconds since the epoch (0 if unreadable)."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class ProgressListener(StreamingQueryListener):
    """Register with ``spark.streams.addListener``; call ``close()`` when done."""

    def __init__(self, console: Console | None = None, *, show: bool = True) -> None:
        #: Called (on the listener's own thread) with each batch's progress.
        self.observers: list[Callable[[BatchProgress], None]] = []
        self._queue: queue.SimpleQueue[BatchProgress | None] = queue.SimpleQueue()
        self._console = console or Console(stderr=True)
        self._show = show
        self._lock = threading.Lock()
        self.totals: dict[str, FlowTotals] = {}
        self._thread = threading.Thread(target=self._drain, name="eventlake-progress", daemon=True)
        self._thread.start()

    @property
    def _jlistener(self) -> Any:
        """What ``spark.streams.addListener`` registers in the JVM: :class:`_JsonEvents`."""
        from pyspark import SparkContext

        if getattr(self, "_jlistenerobj", None) is None:
            jvm = SparkContext._jvm
            assert jvm is not None
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_JsonEvents(self))
        return self._jlistenerobj

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        # A listener must never fail the query's thread; what it cannot read goes to the log.
        try:
            if not str(event.progress.name or "").startswith(INTERNAL_QUERY_PREFIX):
                self._queue.put(_progress(event.progress))
        except Exception:
            log.exception("progress event not read: %r", event)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            # Observers first: whoever sees a batch in the totals knows they all have it.
            for observe in list(self.observers):
                try:
                    observe(item)
                except Exception:  # monitoring never stops the progress lines
                    log.exception("progress observer %r failed on %s", observe, item.query)
            with self._lock:
                t = self.totals.setdefault(item.query, FlowTotals())
                # A batch without rows is worth a line when the watermark moved or the
                # state changed: the no-data batch where windows close and state falls.
                # Not a repeated report of one batch, nor an empty batch that did nothing.
                new_batch = item.batch_id != t.last_batch_id
                moved = (item.watermark, item.state_rows) != (t.watermark, t.state_rows)
                t.batches += new_batch
                t.input_rows += item.input_rows
                t.dropped_by_watermark += item.dropped_by_watermark
                t.last_batch_id = item.batch_id
                t.state_rows = item.state_rows
                t.watermark = item.watermark
                t.peak_state_rows = max(t.peak_state_rows, item.state_rows)
                t.quarantined_rows += item.quarantined_rows
            shown = item.input_rows or item.dropped_by_watermark or (new_batch and moved)
            if self._show and shown:
                self._console.print(item.line(), highlight=False, soft_wrap=True, markup=False)

    def snapshot(self) -> dict[str, FlowTotals]:
        with self._lock:
            return {k: FlowTotals(**vars(v)) for k, v in self.totals.items()}

    def close(self, timeout: float = 5.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)
