"""Order events: ``order_id``, ``user_id``, ``category``, ``region``, ``amount``, ``event_time``.

Reproducible by seed: the same seed and settings give the same records in the same order.
Event time follows a simulated clock that advances by a random gap per new order, so a
short run can span hours of event time and close windows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlake.generator.base import GeneratedRecord
from eventlake.generator.events import DEFAULT_START, EventStream, EventStreamConfig, iso

CATEGORIES = ("books", "electronics", "garden", "grocery", "toys", "fashion")
REGIONS = ("eu-west", "eu-north", "us-east", "us-west", "ap-south")
MALFORMED_REASONS = (
    "invalid_json",
    "missing_order_id",
    "missing_event_time",
    "invalid_event_time",
    "invalid_amount",
    "empty_category",
)


@dataclass(frozen=True)
class OrdersConfig(EventStreamConfig):
    id_prefix: str = "o"


class OrdersGenerator(EventStream):
    """Stateful: successive ``records(n)`` calls continue the same stream."""

    key_field = "order_id"

    def __init__(self, config: OrdersConfig | None = None) -> None:
        self.config: OrdersConfig = config or OrdersConfig()
        super().__init__(self.config)
        self._next_id = 0

    def _event(self, event_time: datetime) -> dict[str, Any]:
        rng = self._rng
        order_id = f"{self.config.id_prefix}{self.config.seed}-{self._next_id:08d}"
        self._next_id += 1
        return {
            "order_id": order_id,
            "user_id": f"u{rng.randrange(1, 500):04d}",
            "category": rng.choice(CATEGORIES),
            "region": rng.choice(REGIONS),
            "amount": round(rng.lognormvariate(4.5, 1.3), 2),
            "event_time": iso(event_time),
        }

    def _malformed(self) -> GeneratedRecord:
        rng = self._rng
        reason = rng.choice(MALFORMED_REASONS)
        order = self._event(self._clock)
        key: str | None = order["order_id"]
        if reason == "invalid_json":
            value = rng.choice(
                ['{"order_id": "' + str(key) + '", "amount": ', "not json", "[1, 2]"]
            )
        else:
            if reason == "missing_order_id":
                del order["order_id"]
                key = None
            elif reason == "missing_event_time":
                del order["event_time"]
            elif reason == "invalid_event_time":
                order["event_time"] = rng.choice(["yesterday", "2026-13-45T99:00:00Z", ""])
            elif reason == "invalid_amount":
                order["amount"] = rng.choice(["lots", -5.0, True, {"eur": 3}])
            elif reason == "empty_category":
                order["category"] = rng.choice(["", "   "])
            value = json.dumps(order, separators=(",", ":"))
        return GeneratedRecord(key, value, "malformed", reason=reason)


def generate_orders(
    count: int,
    *,
    seed: int = 0,
    start: datetime = DEFAULT_START,
    mean_gap_seconds: float = 2.0,
    id_prefix: str = "o",
) -> Iterator[dict[str, Any]]:
    """``count`` valid orders in event-time order; the same seed gives the same orders."""
    config = OrdersConfig(
        seed=seed, start=start, mean_gap_seconds=mean_gap_seconds, id_prefix=id_prefix
    )
    for record in OrdersGenerator(config).records(count):
        assert record.data is not None
        yield record.data


def order_records(orders: Iterator[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Kafka ``(key, value)`` pairs: key ``order_id``, value the JSON text."""
    for order in orders:
        yield order["order_id"], json.dumps(order, separators=(",", ":"))
