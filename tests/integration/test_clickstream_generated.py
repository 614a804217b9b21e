"""The clickstream pipeline on generated input with late, out-of-order, duplicate and
malformed events, against an independent batch-by-batch computation."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eventlake.checkpoints import CheckpointLog
from eventlake.generator.base import send
from eventlake.generator.clicks import ClicksConfig, ClicksGenerator
from eventlake.testing import run_available_now, settings_for
from eventlake.testing.watermark import EPOCH
from tests.integration.clickstream_expected import clicks_5min, kept_clicks, sessions
from tests.integration.event_time_helpers import (
    as_rows,
    read_topic,
    table,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("decoder", ["spark", "arrow"])
def test_clickstream_tables_equal_the_batch_by_batch_truth(
    spark: SparkSession,
    bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
    decoder: str,
) -> None:
    topic = make_topic(partitions=2, prefix="clicks")
    settings = settings_for(
        tmp_path,
        bootstrap,
        clickstream=dict(topic=topic, max_offsets_per_trigger=120, json_decoder=decoder),
        examples=True,
    )
    gen = ClicksGenerator(ClicksConfig(
        seed=11, late_fraction=0.04, late_delay=timedelta(minutes=40),
        out_of_order_fraction=0.1, out_of_order_max=timedelta(minutes=8),
        duplicate_fraction=0.05, malformed_fraction=0.03,
    ))  # fmt: skip
    results = []
    for _ in range(2):
        send(bootstrap, topic, gen.records(500))
        results.append(run_available_now("clickstream", settings))

    fields = ("event_id", "user_id", "event_type", "page", "event_time")
    records = read_topic(bootstrap, topic, fields, "event_time")
    checkpoint = settings.checkpoints.for_flow("clickstream", "clicks")
    delay = timedelta(minutes=10)
    kept, final_wm, wms = kept_clicks(records, topic, checkpoint, delay)
    log = CheckpointLog(checkpoint)
    # The watermark recomputed from the records is the one Spark ran each batch with.
    assert [EPOCH + timedelta(milliseconds=log.watermark_ms(b)) for b in log.planned] == wms
    dropped = sum(r.flows["clickstream.clicks"].dropped_by_watermark for r in results)
    valid = sum(1 for *_, d in records if d is not None)
    assert dropped > 0

    silver = table(settings, "silver", "clicks")
    assert sorted(silver["event_id"]) == sorted(c.event_id for c in kept)
    duplicates = valid - dropped - len(kept)
    assert duplicates > 0  # some were removed by de-duplication, not as late

    quarantine = table(settings, "silver", "clicks_quarantine")
    assert len(quarantine) == len(records) - valid
    assert set(quarantine["reason"]) <= {
        "invalid_json", "missing_event_id", "missing_user_id", "missing_event_time",
        "invalid_event_time",
    }  # fmt: skip

    gold_wm = CheckpointLog(settings.checkpoints.for_flow("clickstream", "user_clicks_5min"))
    assert EPOCH + timedelta(milliseconds=gold_wm.watermark_ms(gold_wm.planned[-1])) == final_wm

    windows = table(settings, "gold", "user_clicks_5min")
    assert as_rows(windows, ["window_start", "window_end", "user_id", "clicks"]) == clicks_5min(
        kept, final_wm
    )
    expected_sessions = sessions(kept, timedelta(minutes=30), final_wm)
    assert len(expected_sessions) >= 10
    plain = table(settings, "gold", "user_sessions")
    assert as_rows(plain, ["session_start", "session_end", "user_id", "events"]) == {
        s[:4] for s in expected_sessions
    }
    custom = table(settings, "gold", "user_sessions_custom")
    columns = ["session_start", "session_end", "user_id", "events", "pages", "first_page",
               "last_page"]  # fmt: skip
    assert as_rows(custom, columns) == expected_sessions
    # Row for row, the two session tables agree.
    assert as_rows(custom, columns[:4]) == as_rows(plain, columns[:4])
