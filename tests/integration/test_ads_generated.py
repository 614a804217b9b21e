"""The ads pipeline on generated impressions and clicks (late, out-of-order, duplicate,
malformed), against an independent computation with the batch-by-batch watermark rule."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from eventlake.checkpoints import CheckpointLog
from eventlake.config import Settings
from eventlake.generator.ads import CLICKS, IMPRESSIONS, AdsConfig, AdsGenerator
from eventlake.kafka.admin import produce
from eventlake.testing import run_available_now, settings_for
from eventlake.testing.watermark import EPOCH, by_batch, kafka_batches, not_late
from tests.integration.clickstream_expected import parse_time
from tests.integration.event_time_helpers import (
    as_rows,
    read_topic,
    table,
)

pytestmark = pytest.mark.integration
WATERMARK = timedelta(minutes=10)
WINDOW = timedelta(minutes=5)


def kept(settings: Settings, bootstrap: str, topic: str, flow: str,
         fields: tuple[str, ...]) -> tuple[list[dict[str, Any]], datetime]:  # fmt: skip
    """Events of ``flow`` that pass the late rule and de-duplication, and the newest time."""
    key, time = fields[0], fields[-1]
    records = read_topic(bootstrap, topic, fields, time)
    valid = [{**d, "_p": p, "_o": o, time: parse_time(d[time])} for p, o, d in records if d]
    batches = kafka_batches(settings.checkpoints.for_flow("ads", flow))
    # Several batches per run, so the watermark moves between them (clicks are fewer).
    assert sum(any(a < b for a, b in k.ranges.values()) for k in batches) >= 3, "too few batches"
    grouped = by_batch(valid, batches, lambda e: (topic, e["_p"], e["_o"]))
    seen: set[str] = set()
    out = []
    for e in not_late(grouped, lambda e: e[time], WATERMARK):
        if e[key] not in seen:
            seen.add(e[key])
            out.append(e)
    return out, max(e[time] for e in valid)


def final_watermark(settings: Settings, flow: str) -> datetime:
    log = CheckpointLog(settings.checkpoints.for_flow("ads", flow))
    return EPOCH + timedelta(milliseconds=log.watermark_ms(log.planned[-1]))


def test_ads_tables_equal_the_batch_by_batch_truth(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topics = {IMPRESSIONS: make_topic(partitions=2, prefix="imp"),
              CLICKS: make_topic(partitions=2, prefix="clk")}  # fmt: skip
    settings = settings_for(
        tmp_path, bootstrap, ads=dict(topics=topics, max_offsets_per_trigger=80), examples=True
    )
    gen = AdsGenerator(AdsConfig(
        seed=5, late_fraction=0.04, late_delay=timedelta(minutes=40),
        out_of_order_fraction=0.1, duplicate_fraction=0.05, malformed_fraction=0.03,
    ))  # fmt: skip
    for _ in range(2):
        out: dict[str, list[tuple[str | None, str | None]]] = defaultdict(list)
        for role, record in gen.stream(350):
            out[role].append((record.key, record.value))
        for role, pairs in out.items():
            produce(bootstrap, topics[role], pairs)
        run_available_now("ads", settings)

    imp_fields = ("impression_id", "user_id", "ad_id", "impression_time")
    clk_fields = ("click_id", "user_id", "ad_id", "click_time")
    imps, newest_imp = kept(settings, bootstrap, topics[IMPRESSIONS], "impressions", imp_fields)
    clks, newest_clk = kept(settings, bootstrap, topics[CLICKS], "clicks", clk_fields)
    assert sorted(table(settings, "silver", "ad_impressions")["impression_id"]) == sorted(
        i["impression_id"] for i in imps
    )
    assert sorted(table(settings, "silver", "ad_clicks")["click_id"]) == sorted(
        c["click_id"] for c in clks
    )

    pairs = {
        (
            c["click_id"],
            i["impression_id"],
            i["user_id"],
            i["ad_id"],
            i["impression_time"],
            c["click_time"],
        )
        for i in imps
        for c in clks
        if (i["user_id"], i["ad_id"]) == (c["user_id"], c["ad_id"])
        and i["impression_time"] <= c["click_time"] <= i["impression_time"] + WINDOW
    }
    assert len(pairs) >= 30
    attributed = table(settings, "silver", "ad_clicks_attributed")
    cols = ["click_id", "impression_id", "user_id", "ad_id", "impression_time", "click_time"]
    assert as_rows(attributed, cols) == pairs
    assert len(attributed) == len(pairs)  # each match written once

    # The join's watermark is the slower input's: min of both, minus the delay.
    join_wm = final_watermark(settings, "outcome")
    assert join_wm == min(newest_imp, newest_clk) - WATERMARK
    matched = {p[1] for p in pairs}
    expected_outcome = {(p[1], p[2], p[3], p[4], p[0], p[5]) for p in pairs} | {
        (i["impression_id"], i["user_id"], i["ad_id"], i["impression_time"], None, None)
        for i in imps
        if i["impression_id"] not in matched and i["impression_time"] + WINDOW < join_wm
    }
    outcome = table(settings, "silver", "ad_impressions_outcome")
    cols = ["impression_id", "user_id", "ad_id", "impression_time", "click_id", "click_time"]
    got = {tuple(None if v != v else v for v in row) for row in as_rows(outcome, cols)}
    assert got == expected_outcome
    assert len(outcome) == len(expected_outcome)
    assert sum(1 for o in expected_outcome if o[4] is None) >= 50

    ctr_wm = final_watermark(settings, "ctr_hourly")
    assert ctr_wm == max(o[3] for o in expected_outcome) - timedelta(minutes=30)
    hours: dict[tuple[datetime, str], list[tuple[Any, ...]]] = defaultdict(list)
    for o in expected_outcome:
        hours[(o[3].replace(minute=0, second=0, microsecond=0), o[2])].append(o)
    expected_ctr = set()
    for (start, ad), rows in hours.items():
        if start + timedelta(hours=1) <= ctr_wm:
            n_imp = len({r[0] for r in rows})
            n_clk = len({r[4] for r in rows if r[4] is not None})
            users = len({r[1] for r in rows})
            expected_ctr.add((start, start + timedelta(hours=1), ad, n_imp, n_clk, users,
                              round(n_clk / n_imp, 9)))  # fmt: skip
    assert expected_ctr
    ctr = table(settings, "gold", "ad_ctr_hourly")
    ctr["ctr"] = ctr["ctr"].round(9)
    cols = ["window_start", "window_end", "ad_id", "impressions", "clicks", "unique_users", "ctr"]
    assert as_rows(ctr, cols) == expected_ctr
