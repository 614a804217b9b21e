"""The sensors pipeline on generated readings: sliding-window statistics in append mode
(closed windows) and in update mode upserted (every window, open ones included), against
an independent computation with the batch-by-batch watermark rule."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from eventlake.checkpoints import CheckpointLog
from eventlake.generator.base import send
from eventlake.generator.sensors import SensorsConfig, SensorsGenerator
from eventlake.testing import run_available_now, settings_for
from eventlake.testing.watermark import EPOCH, by_batch, kafka_batches, not_late
from tests.integration.clickstream_expected import parse_time
from tests.integration.event_time_helpers import (
    as_rows,
    read_topic,
    table,
)

pytestmark = pytest.mark.integration
WATERMARK = timedelta(minutes=5)


def sliding(kept: list[dict[str, Any]]) -> dict[tuple[datetime, str], list[float]]:
    """Temperatures per (window start, sensor): 5-minute windows sliding by 1 minute."""
    out: dict[tuple[datetime, str], list[float]] = defaultdict(list)
    for r in kept:
        minute = r["event_time"].replace(second=0, microsecond=0)
        for back in range(5):
            out[(minute - timedelta(minutes=back), r["sensor_id"])].append(r["temperature"])
    return out


def stats(windows: dict[tuple[datetime, str], list[float]]) -> set[tuple[Any, ...]]:
    return {
        (s, s + timedelta(minutes=5), sensor, len(t), round(sum(t) / len(t), 6), min(t), max(t))
        for (s, sensor), t in windows.items()
    }


def test_sensor_statistics_equal_the_batch_by_batch_truth(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2, prefix="sensors")
    settings = settings_for(
        tmp_path, bootstrap, sensors=dict(topic=topic, max_offsets_per_trigger=120), examples=True
    )
    gen = SensorsGenerator(SensorsConfig(
        seed=2, late_fraction=0.04, late_delay=timedelta(minutes=12),
        out_of_order_fraction=0.1, duplicate_fraction=0.05, malformed_fraction=0.03,
    ))  # fmt: skip
    for _ in range(2):
        send(bootstrap, topic, gen.records(400))
        run_available_now("sensors", settings)

    fields = ("sensor_id", "temperature", "event_time")
    records = read_topic(bootstrap, topic, fields, "event_time")
    valid = []
    for p, o, d in records:
        try:
            temperature = float(d["temperature"]) if d else None
        except (TypeError, ValueError):
            temperature = None
        if d and temperature is not None:
            valid.append({**d, "temperature": temperature, "_p": p, "_o": o,
                          "event_time": parse_time(d["event_time"])})  # fmt: skip
    batches = kafka_batches(settings.checkpoints.for_flow("sensors", "readings"))
    assert sum(any(a < b for a, b in k.ranges.values()) for k in batches) >= 4, "too few batches"
    grouped = by_batch(valid, batches, lambda r: (topic, r["_p"], r["_o"]))
    seen: set[tuple[str, datetime]] = set()
    kept = []
    for r in not_late(grouped, lambda r: r["event_time"], WATERMARK):
        if (r["sensor_id"], r["event_time"]) not in seen:
            seen.add((r["sensor_id"], r["event_time"]))
            kept.append(r)
    assert len(kept) < len(valid)
    assert len(table(settings, "silver", "sensor_readings")) == len(kept)
    assert len(table(settings, "silver", "sensor_readings_quarantine")) == len(records) - len(valid)

    log = CheckpointLog(settings.checkpoints.for_flow("sensors", "stats_sliding"))
    final_wm = EPOCH + timedelta(milliseconds=log.watermark_ms(log.planned[-1]))
    assert final_wm == max(r["event_time"] for r in valid) - WATERMARK
    cols = ["window_start", "window_end", "sensor_id", "readings", "avg_temperature",
            "min_temperature", "max_temperature"]  # fmt: skip
    expected = stats(sliding(kept))

    closed = table(settings, "gold", "sensor_stats_sliding")
    closed["avg_temperature"] = closed["avg_temperature"].round(6)
    assert as_rows(closed, cols) == {e for e in expected if e[1] <= final_wm}

    # Update mode, upserted: every window, the open ones with their latest values.
    live = table(settings, "gold", "sensor_stats_live")
    live["avg_temperature"] = live["avg_temperature"].round(6)
    assert as_rows(live, cols) == expected
    assert any(e[1] > final_wm for e in expected)  # some windows are still open
