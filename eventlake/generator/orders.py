"""Order events: ``order_id``, ``user_id``, ``category``, ``region``, ``amount``, ``event_time``.

Reproducible by seed: the same seed and settings give the same records in the same order.
Event time follows a simulated clock that advances by a random gap per new order, so a
short run can span hours of event time and close windows.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from eventlake.generator.base import GeneratedRecord

CATEGORIES = ("books", "electronics", "garden", "grocery", "toys", "fashion")
REGIONS = ("eu-west", "eu-north", "us-east", "us-west", "ap-south")
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
MALFORMED_REASONS = (
    "invalid_json",
    "missing_order_id",
    "missing_event_time",
    "invalid_event_time",
    "invalid_amount",
    "empty_category",
)


def iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class OrdersConfig:
    seed: int = 0
    start: datetime = DEFAULT_START
    mean_gap_seconds: float = 2.0
    late_fraction: float = 0.0
    late_delay: timedelta = timedelta(minutes=15)
    out_of_order_fraction: float = 0.0
    out_of_order_max: timedelta = timedelta(minutes=3)
    duplicate_fraction: float = 0.0
    malformed_fraction: float = 0.0
    id_prefix: str = "o"

    def __post_init__(self) -> None:
        total = (
            self.late_fraction
            + self.out_of_order_fraction
            + self.duplicate_fraction
            + self.malformed_fraction
        )
        if not 0 <= total <= 1:
            raise ValueError("late + out-of-order + duplicate + malformed fractions exceed 1")


class OrdersGenerator:
    """Stateful: successive ``records(n)`` calls continue the same stream."""

    def __init__(self, config: OrdersConfig | None = None) -> None:
        self.config = config or OrdersConfig()
        self._rng = random.Random(self.config.seed)
        self._clock = self.config.start
        self._next_id = 0
        self._recent: deque[tuple[str, str, dict[str, Any]]] = deque(maxlen=20)

    @property
    def clock(self) -> datetime:
        """The newest event time generated so far."""
        return self._clock

    def _order(self, event_time: datetime) -> dict[str, Any]:
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

    def _emit(self, order: dict[str, Any], kind: str) -> GeneratedRecord:
        value = json.dumps(order, separators=(",", ":"))
        self._recent.append((order["order_id"], value, order))
        return GeneratedRecord(order["order_id"], value, kind, data=order)

    def _malformed(self) -> GeneratedRecord:
        rng = self._rng
        reason = rng.choice(MALFORMED_REASONS)
        order = self._order(self._clock)
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

    def next_record(self) -> GeneratedRecord:
        c, rng = self.config, self._rng
        r = rng.random()
        bands = (
            ("malformed", c.malformed_fraction),
            ("duplicate", c.duplicate_fraction),
            ("late", c.late_fraction),
            ("out_of_order", c.out_of_order_fraction),
        )
        kind = "valid"
        for name, fraction in bands:
            if r < fraction:
                kind = name
                break
            r -= fraction
        if kind == "malformed":
            return self._malformed()
        if kind == "duplicate" and self._recent:
            key, value, order = rng.choice(list(self._recent))
            return GeneratedRecord(key, value, "duplicate", data=order)
        if kind == "late":
            return self._emit(self._order(self._clock - c.late_delay), "late")
        if kind == "out_of_order":
            back = timedelta(seconds=rng.uniform(0, c.out_of_order_max.total_seconds()))
            return self._emit(self._order(self._clock - back), "out_of_order")
        self._clock += timedelta(seconds=rng.expovariate(1.0 / c.mean_gap_seconds))
        return self._emit(self._order(self._clock), "valid")

    def records(self, count: int | None = None) -> Iterator[GeneratedRecord]:
        """``count`` records, or an endless stream when ``count`` is None."""
        i = 0
        while count is None or i < count:
            yield self.next_record()
            i += 1


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
