from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

from eventlake.generator import OrdersConfig, OrdersGenerator
from eventlake.generator.orders import MALFORMED_REASONS, iso


def config(**kw: object) -> OrdersConfig:
    base = dict(seed=5, late_fraction=0.1, out_of_order_fraction=0.1,
                duplicate_fraction=0.1, malformed_fraction=0.1)  # fmt: skip
    return OrdersConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_reproducible_by_seed() -> None:
    a = list(OrdersGenerator(config()).records(500))
    b = list(OrdersGenerator(config()).records(500))
    c = list(OrdersGenerator(config(seed=6)).records(500))
    assert a == b
    assert a != c


def test_fractions_and_truth() -> None:
    records = list(OrdersGenerator(config()).records(5000))
    kinds = Counter(r.kind for r in records)
    for kind in ("late", "out_of_order", "duplicate", "malformed"):
        assert 350 < kinds[kind] < 650, kinds
    assert {r.reason for r in records if r.kind == "malformed"} == set(MALFORMED_REASONS)
    seen: set[str] = set()
    for r in records:
        if r.kind == "duplicate":
            assert r.key in seen  # a duplicate re-sends an order already sent
        elif r.kind != "malformed":
            assert r.data is not None
            assert r.key == r.data["order_id"]
            assert json.loads(r.value or "") == r.data
            seen.add(r.key or "")


def test_late_events_are_behind_by_the_delay() -> None:
    gen = OrdersGenerator(config(late_delay=timedelta(minutes=25)))
    for r in gen.records(2000):
        if r.kind == "late":
            assert r.data is not None
            # At generation time the clock had not moved: the event is exactly 25 min behind.
            assert r.data["event_time"] <= iso(gen.clock - timedelta(minutes=25))
