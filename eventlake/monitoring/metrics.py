"""Prometheus metrics of one running pipeline, labelled by pipeline and flow.

Names follow Prometheus conventions: ``eventlake_`` prefix, base units (seconds, bytes),
``_total`` for counters. Batch figures come from each batch's progress; Kafka lag from
the lag poller of :class:`~eventlake.operations.run_monitor.RunMonitor`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.metrics_core import Metric

from eventlake.durations import duration_ms
from eventlake.monitoring.lag import PartitionLag
from eventlake.monitoring.progress import BatchProgress, epoch_seconds
from eventlake.triggers import parse_trigger

FLOW = ("pipeline", "flow")
#: Batch durations from a few-row real-time batch to a backlog catch-up.
BATCH_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


PARTITION = ("topic", "partition")
#: Each metric: attribute, kind, name, help, labels beyond pipeline and flow.
_METRICS: tuple[tuple[str, type[Counter | Gauge], str, str, tuple[str, ...]], ...] = (
    ("input_rows", Counter, "eventlake_input_rows", "Rows the flow read from its inputs.", ()),
    ("processed_rows", Counter, "eventlake_processed_rows",
     "Rows the flow's transform produced and its output took.", ()),
    ("watermark", Gauge, "eventlake_watermark_seconds",
     "Event-time watermark of the flow, seconds since the epoch (0: none yet).", ()),
    ("state_rows", Gauge, "eventlake_state_rows", "Rows held in the flow's state stores.", ()),
    ("state_bytes", Gauge, "eventlake_state_bytes", "Memory used by the flow's state stores.", ()),
    ("dropped", Counter, "eventlake_rows_dropped_by_watermark",
     "Rows dropped because their event time was behind the watermark.", ()),
    ("late_kept", Counter, "eventlake_late_rows_kept",
     "Rows the watermark dropped, written to the flow's <table>_late.", ()),
    ("quarantined", Counter, "eventlake_quarantined_rows",
     "Rows written to a quarantine table.", ()),
    ("expectation_rows", Counter, "eventlake_expectation_rows",
     "Rows an expectation checked, by outcome (passed, failed).", ("expectation", "outcome")),
    ("lag_records", Gauge, "eventlake_kafka_lag_records",
     "Records in the partition the flow has not processed yet.", PARTITION),
    ("lag_seconds", Gauge, "eventlake_kafka_lag_seconds",
     "Age of the oldest record in the partition the flow has not processed (0: none).",
     PARTITION),
    ("last_batch", Gauge, "eventlake_last_batch_id", "Id of the flow's last completed batch.", ()),
    ("last_commit", Gauge, "eventlake_last_commit_timestamp_seconds",
     "When the flow's last batch completed, seconds since the epoch.", ()),
    ("trigger_interval", Gauge, "eventlake_trigger_interval_seconds",
     "The flow's processing-time trigger interval (0: not a processing-time trigger).", ()),
    ("up", Gauge, "eventlake_flow_running", "1 while the flow's query runs, else 0.", ()),
    ("restarts", Counter, "eventlake_flow_restarts",
     "Restarts of the flow after a failure, by the error's code.", ("reason",)),
)  # fmt: skip


TABLE = ("pipeline", "table")
#: Each table metric: the key of a table report, name, help.
_TABLES = (
    ("files", "eventlake_table_files", "Data files in the Delta table's current version."),
    ("bytes", "eventlake_table_bytes", "Bytes of the Delta table's current data files."),
    ("small_files", "eventlake_table_small_files",
     "Data files under maintenance.small_file_bytes (compaction merges them)."),
    ("last_compact", "eventlake_table_last_compaction_timestamp_seconds",
     "When the table was last compacted, seconds since the epoch."),
    ("last_vacuum", "eventlake_table_last_vacuum_timestamp_seconds",
     "When the table was last vacuumed, seconds since the epoch."),
)  # fmt: skip


class PipelineMetrics:
    """The metrics of ``pipeline``'s flows, in a registry of their own."""

    input_rows: Counter
    processed_rows: Counter
    watermark: Gauge
    state_rows: Gauge
    state_bytes: Gauge
    dropped: Counter
    late_kept: Counter
    quarantined: Counter
    expectation_rows: Counter
    lag_records: Gauge
    lag_seconds: Gauge
    last_batch: Gauge
    last_commit: Gauge
    trigger_interval: Gauge
    up: Gauge
    restarts: Counter

    def __init__(self, pipeline: str) -> None:
        self.pipeline = pipeline
        self.registry = CollectorRegistry(auto_describe=True)
        for attribute, kind, name, text, labels in _METRICS:
            metric = kind(name, text, (*FLOW, *labels), registry=self.registry)
            setattr(self, attribute, metric)
        self.batch_duration = Histogram(
            "eventlake_batch_duration_seconds", "Wall time of each micro-batch.", FLOW,
            buckets=BATCH_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.table_gauges = {
            key: Gauge(name, text, TABLE, registry=self.registry) for key, name, text in _TABLES
        }
        self.maintenance_failed = Counter(
            "eventlake_table_maintenance_failures",
            "Maintenance actions on the table that failed in this run, by kind (compact, "
            "vacuum); each is tried again when the table is next due.",
            (*TABLE, "kind"), registry=self.registry,
        )  # fmt: skip
        self._failures_seen: dict[tuple[str, str], int] = {}
        self._failures_lock = threading.Lock()  # scrapes and status reads run on threads

    def tables(self, reports: list[dict[str, Any]]) -> None:
        """The written tables' files and last maintenance (``table_report`` records)."""
        for report in reports:
            for key, gauge in self.table_gauges.items():
                value = report.get(key)
                if isinstance(value, dict):
                    value = value.get("at")
                if isinstance(value, int | float):
                    gauge.labels(self.pipeline, report["table"]).set(value)

    def maintenance_failures(self, failed: dict[str, dict[str, Any]]) -> None:
        """The run's failed maintenance so far, per table: ``counts`` by kind
        (:meth:`~eventlake.connectors.delta.Maintenance.failures`)."""
        with self._failures_lock:
            for table, record in failed.items():
                for kind, count in record["counts"].items():
                    seen = self._failures_seen.get((table, kind), 0)
                    if count > seen:
                        labels = (self.pipeline, table, kind)
                        self.maintenance_failed.labels(*labels).inc(count - seen)
                        self._failures_seen[(table, kind)] = count

    def flow_started(self, flow: str, trigger: str = "") -> None:
        """Create the flow's series at zero, so a scrape sees every flow from the start."""
        labels = (self.pipeline, flow)
        interval = parse_trigger(trigger).get("processingTime") if trigger else None
        seconds = duration_ms(str(interval)) / 1000.0 if interval else 0.0
        self.trigger_interval.labels(*labels).set(seconds)
        for metric in (self.input_rows, self.processed_rows, self.dropped, self.late_kept,
                       self.quarantined):  # fmt: skip
            metric.labels(*labels)
        self.batch_duration.labels(*labels)
        self.up.labels(*labels).set(1)

    def batch(self, p: BatchProgress) -> None:
        """Record one batch's progress (``p.query`` is ``<pipeline>.<flow>``)."""
        labels = (self.pipeline, p.query.split(".", 1)[-1])
        self.input_rows.labels(*labels).inc(p.input_rows)
        if p.output_rows is not None:
            self.processed_rows.labels(*labels).inc(p.output_rows)
        self.batch_duration.labels(*labels).observe(p.batch_duration_ms / 1000.0)
        self.watermark.labels(*labels).set(epoch_seconds(p.watermark))  # 0 before the first
        self.state_rows.labels(*labels).set(p.state_rows)
        self.state_bytes.labels(*labels).set(p.state_bytes)
        self.dropped.labels(*labels).inc(p.dropped_by_watermark)
        self.quarantined.labels(*labels).inc(p.quarantined_rows)
        for name, passed, failed in p.expectations:
            self.expectation_rows.labels(*labels, name, "passed").inc(passed)
            self.expectation_rows.labels(*labels, name, "failed").inc(failed)
        self.last_batch.labels(*labels).set(p.batch_id)
        self.last_commit.labels(*labels).set(p.timestamp + p.batch_duration_ms / 1000.0)

    def lag(self, flow: str, lags: list[PartitionLag]) -> None:
        for lag in lags:
            labels = (self.pipeline, flow, lag.topic, str(lag.partition))
            self.lag_records.labels(*labels).set(lag.records)
            self.lag_seconds.labels(*labels).set(round(lag.seconds, 3))

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(_WithoutCreated(self.registry))


class _WithoutCreated:
    """A registry's metrics without their ``_created`` series, which double every
    counter's output and which no rule or panel uses (prometheus_client's own switch is
    process-wide)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family
