"""Order events: ``order_id``, ``user_id``, ``category``, ``region``, ``amount``, ``event_time``."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

CATEGORIES = ("books", "electronics", "garden", "grocery", "toys", "fashion")
REGIONS = ("eu-west", "eu-north", "us-east", "us-west", "ap-south")
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


def generate_orders(
    count: int,
    *,
    seed: int = 0,
    start: datetime = DEFAULT_START,
    mean_gap_seconds: float = 2.0,
    id_prefix: str = "o",
) -> Iterator[dict[str, Any]]:
    """``count`` valid orders in event-time order; the same seed gives the same orders."""
    rng = random.Random(seed)
    event_time = start
    for i in range(count):
        event_time += timedelta(seconds=rng.expovariate(1.0 / mean_gap_seconds))
        yield {
            "order_id": f"{id_prefix}{seed}-{i:08d}",
            "user_id": f"u{rng.randrange(1, 500):04d}",
            "category": rng.choice(CATEGORIES),
            "region": rng.choice(REGIONS),
            "amount": round(rng.lognormvariate(3.5, 1.2), 2),
            "event_time": event_time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        }


def order_records(orders: Iterator[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Kafka ``(key, value)`` pairs: key ``order_id``, value the JSON text."""
    for order in orders:
        yield order["order_id"], json.dumps(order, separators=(",", ":"))
