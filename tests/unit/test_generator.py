from __future__ import annotations

import json

from eventlake.generator import CATEGORIES, generate_orders, order_records


def test_same_seed_same_orders() -> None:
    assert list(generate_orders(50, seed=7)) == list(generate_orders(50, seed=7))
    assert list(generate_orders(50, seed=7)) != list(generate_orders(50, seed=8))


def test_orders_are_complete_and_keyed() -> None:
    records = list(order_records(generate_orders(100, seed=1)))
    keys = [k for k, _ in records]
    assert len(set(keys)) == 100
    for key, value in records:
        order = json.loads(value)
        assert order["order_id"] == key
        assert order["category"] in CATEGORIES
        assert order["amount"] >= 0
        assert order["event_time"].endswith("Z")
