from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console

from eventlake.monitoring.progress import ProgressListener


def progress(batch: int, rows: int, dropped: int = 0) -> SimpleNamespace:
    op = SimpleNamespace(operatorName="dedupeWithinWatermark", numRowsTotal=7,
                         numRowsDroppedByWatermark=dropped, memoryUsedBytes=4096)  # fmt: skip
    return SimpleNamespace(
        progress=SimpleNamespace(
            name="orders.silver", id="x", batchId=batch, numInputRows=rows,
            inputRowsPerSecond=10.0, processedRowsPerSecond=20.0, batchDuration=1500,
            eventTime={"watermark": "2026-01-01T00:10:00.000Z"}, stateOperators=[op],
        )
    )  # fmt: skip


def test_listener_prints_a_line_per_batch_and_keeps_totals() -> None:
    console = Console(record=True, width=200)
    listener = ProgressListener(console)
    listener.onQueryProgress(progress(0, 100))
    listener.onQueryProgress(progress(1, 50, dropped=3))
    listener.onQueryProgress(progress(2, 0))  # a no-data batch: the watermark closes windows
    listener.onQueryProgress(progress(2, 0))  # the same batch again: an idle report
    listener.onQueryProgress(SimpleNamespace(progress=None))  # never raises into Spark
    listener.close()
    totals = listener.totals["orders.silver"]
    assert (totals.batches, totals.input_rows, totals.dropped_by_watermark) == (3, 150, 3)
    assert totals.last_batch_id == 2
    text = console.export_text()
    assert "[orders.silver] batch 1: 50 rows, 10 in/s, 20 proc/s, 1.50s" in text
    assert (
        "watermark 2026-01-01T00:10:00.000Z, state 7 (dedupeWithinWatermark 7 rows/4 KiB), "
        "late dropped 3" in text
    )
    assert totals.peak_state_rows == 7
    assert text.count("[orders.silver] batch 2: 0 rows") == 1
