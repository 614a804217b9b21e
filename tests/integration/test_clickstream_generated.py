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
from tests.integration.clickstream_expected import (
    CLICK_FIELDS,
    assert_clickstream_tables,
    kept_clicks,
)
from tests.integration.event_time_helpers import read_topic

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

    records = read_topic(bootstrap, topic, CLICK_FIELDS, "event_time")
    checkpoint = settings.checkpoints.for_flow("clickstream", "clicks")
    delay = timedelta(minutes=10)
    kept, final_wm, wms = kept_clicks(records, topic, checkpoint, delay)
    log = CheckpointLog(checkpoint)
    # The watermark recomputed from the records is the one Spark ran each batch with.
    assert [EPOCH + timedelta(milliseconds=log.watermark_ms(b)) for b in log.planned] == wms
    dropped = sum(r.flows["clickstream.clicks"].dropped_by_watermark for r in results)
    valid = sum(1 for *_, d in records if d is not None)
    assert dropped > 0

    assert_clickstream_tables(settings.lake.root, records, kept, final_wm)
    duplicates = valid - dropped - len(kept)
    assert duplicates > 0  # some were removed by de-duplication, not as late

    gold_wm = CheckpointLog(settings.checkpoints.for_flow("clickstream", "user_clicks_5min"))
    assert EPOCH + timedelta(milliseconds=gold_wm.watermark_ms(gold_wm.planned[-1])) == final_wm
