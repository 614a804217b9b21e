from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

from eventlake.generator.ads import CLICKS, IMPRESSIONS, AdsConfig, AdsGenerator
from eventlake.generator.clicks import ClicksConfig, ClicksGenerator
from eventlake.generator.sensors import SensorsConfig, SensorsGenerator

MIX = dict(seed=3, late_fraction=0.05, out_of_order_fraction=0.1, duplicate_fraction=0.05,
           malformed_fraction=0.05)  # fmt: skip


def test_clicks_and_sensors_are_reproducible_with_every_kind_and_reason() -> None:
    for make, reasons in (
        (lambda s: ClicksGenerator(ClicksConfig(**{**MIX, "seed": s})), ClicksGenerator),
        (lambda s: SensorsGenerator(SensorsConfig(**{**MIX, "seed": s})), SensorsGenerator),
    ):
        a, b, c = (list(make(s).records(3000)) for s in (3, 3, 4))
        assert a == b
        assert a != c
        assert set(Counter(r.kind for r in a)) == {
            "valid", "late", "out_of_order", "duplicate", "malformed"
        }  # fmt: skip
        assert {r.reason for r in a if r.kind == "malformed"} == set(reasons.malformed_reasons)
        for r in a:
            if r.kind != "malformed":
                assert json.loads(r.value or "") == r.data


def test_clicks_users_come_and_go() -> None:
    gen = ClicksGenerator(ClicksConfig(seed=1, users=10, active_users=3))
    users = {r.data["user_id"] for r in gen.records(2000) if r.data}
    assert len(users) == 10


def test_ads_clicks_follow_their_impression_within_the_delay() -> None:
    config = AdsConfig(seed=2, click_rate=0.5, max_click_delay=timedelta(minutes=6))
    stream = list(AdsGenerator(config).stream(500))
    impressions = {r.data["impression_id"]: r.data for role, r in stream
                   if role == IMPRESSIONS and r.data}  # fmt: skip
    clicks = [r.data for role, r in stream if role == CLICKS and r.data]
    assert 200 < len(clicks) < 300
    for click in clicks:
        shown = impressions["i" + click["click_id"][1:]]
        assert (shown["user_id"], shown["ad_id"]) == (click["user_id"], click["ad_id"])
        assert shown["impression_time"] <= click["click_time"]


def test_malformed_reasons_follow_required_fields_and_bad_values() -> None:
    """Each required field can go missing and each field with bad values can be invalid;
    the reasons are the pipelines' quarantine reasons."""
    assert ClicksGenerator.malformed_reasons == (
        "invalid_json", "missing_event_id", "missing_user_id", "missing_event_time",
        "invalid_event_time",
    )  # fmt: skip
    assert SensorsGenerator.malformed_reasons == (
        "invalid_json", "missing_sensor_id", "missing_event_time", "invalid_event_time",
        "invalid_temperature",
    )  # fmt: skip
