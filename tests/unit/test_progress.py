from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console

from eventlake.monitoring.progress import ProgressListener


def progress(
    batch: int, rows: int, dropped: int = 0, state: int = 7, watermark: str = "00:10"
) -> SimpleNamespace:
    op = SimpleNamespace(operatorName="dedupeWithinWatermark", numRowsTotal=state,
                         numRowsDroppedByWatermark=dropped, memoryUsedBytes=4096)  # fmt: skip
    return SimpleNamespace(
        progress=SimpleNamespace(
            name="orders.silver", id="x", batchId=batch, numInputRows=rows,
            inputRowsPerSecond=10.0, processedRowsPerSecond=20.0, batchDuration=1500,
            durationMs={"addBatch": 1200, "latestOffset": 40, "triggerExecution": 1500},
            eventTime={"watermark": f"2026-01-01T{watermark}:00.000Z"}, stateOperators=[op],
            timestamp="2026-11-23T10:00:00.000Z",
            sources=[SimpleNamespace(endOffset='{"orders": {"0": 5, "1": 7}}'),
                     SimpleNamespace(endOffset='{"sourceVersion": 1, "reservoirVersion": 3}')],
            observedMetrics={"eventlake_output_rows": [rows - dropped],
                             "eventlake_quarantined_rows_4": [2],
                             "eventlake_quarantined_rows_5": [1], "user_metric": [99]},
        )
    )  # fmt: skip


def test_listener_prints_a_line_per_batch_and_keeps_totals() -> None:
    console = Console(record=True, width=200)
    listener = ProgressListener(console)
    listener.onQueryProgress(progress(0, 100))
    listener.onQueryProgress(progress(1, 50, dropped=3))
    listener.onQueryProgress(progress(2, 0))  # an empty batch that changed nothing
    # A no-data batch: the watermark moved, windows closed, state fell.
    listener.onQueryProgress(progress(3, 0, state=2, watermark="00:20"))
    listener.onQueryProgress(progress(3, 0, state=2, watermark="00:20"))  # the same, again
    listener.onQueryProgress(SimpleNamespace(progress=None))  # never raises into Spark
    listener.close()
    totals = listener.totals["orders.silver"]
    assert (totals.batches, totals.input_rows, totals.dropped_by_watermark) == (4, 150, 3)
    assert totals.last_batch_id == 3
    text = console.export_text()
    assert "[orders.silver] batch 1: 50 rows, 10 in/s, 20 proc/s, 1.50s" in text
    assert (
        "watermark 2026-01-01T00:10:00.000Z, state 7 (dedupeWithinWatermark 7 rows/4 KiB), "
        "late dropped 3" in text
    )
    assert totals.peak_state_rows == 7
    assert totals.state_rows == 2
    assert "batch 2:" not in text
    assert text.count("[orders.silver] batch 3: 0 rows") == 1
    assert "watermark 2026-01-01T00:20:00.000Z, state 2 (" in text


def test_a_batch_carries_its_kafka_offsets_time_and_observed_counts() -> None:
    batches = []
    listener = ProgressListener(Console(record=True), show=False)
    listener.observers.append(batches.append)
    listener.onQueryProgress(progress(0, 100, dropped=4))
    listener.close()
    [batch] = batches
    assert batch.kafka_offsets == {"orders": {0: 5, 1: 7}}  # the Delta source is not Kafka
    assert batch.timestamp == 1795428000.0  # 2026-11-23T10:00:00Z
    assert (batch.output_rows, batch.quarantined_rows) == (96, 3)
    assert batch.state_bytes == 4096
    assert batch.phases_ms == {"addBatch": 1200, "latestOffset": 40, "triggerExecution": 1500}
    assert listener.totals["orders.silver"].quarantined_rows == 3
