"""Ad impressions and the clicks on them, as two streams.

Impressions: ``impression_id``, ``user_id``, ``ad_id``, ``impression_time``. Clicks:
``click_id``, ``user_id``, ``ad_id``, ``click_time``. A share of impressions
(``click_rate``) gets a click up to ``max_click_delay`` later, so some clicks fall outside
a 5-minute attribution window. Clicks are sent when the clock passes their time, and
can themselves be late (sent ``late_delay`` after) or duplicated.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from eventlake.generator.base import GeneratedRecord
from eventlake.generator.events import EventStream, EventStreamConfig, iso, to_json

IMPRESSIONS = "impressions"
CLICKS = "clicks"


@dataclass(frozen=True)
class AdsConfig(EventStreamConfig):
    """Impressions of ``ads`` ads to ``users`` users; a share ``click_rate`` of them is
    clicked, up to ``max_click_delay`` later."""

    mean_gap_seconds: float = 10.0
    users: int = 30
    ads: int = 5
    click_rate: float = 0.3
    max_click_delay: timedelta = timedelta(minutes=6)


class AdsGenerator(EventStream):
    """``stream(n)`` yields ``(role, record)``: ``n`` impressions and their clicks."""

    key_field = "impression_id"
    required_fields = ("impression_id", "impression_time")
    bad_values = {"impression_time": ("yesterday", "")}  # noqa: RUF012

    def __init__(self, config: AdsConfig | None = None) -> None:
        self.config: AdsConfig = config or AdsConfig()
        super().__init__(self.config)
        self._next_id = 0
        # (send at, order, kind, click): clicks waiting for the clock to pass them.
        self._pending: list[tuple[datetime, int, str, dict[str, Any]]] = []

    def _event(self, event_time: datetime) -> dict[str, Any]:
        rng, c = self._rng, self.config
        n = self._next_id
        self._next_id += 1
        impression = {
            "impression_id": f"i{c.seed}-{n:08d}",
            "user_id": f"u{rng.randrange(1, c.users + 1):03d}",
            "ad_id": f"ad{rng.randrange(1, c.ads + 1):02d}",
            "impression_time": iso(event_time),
        }
        if rng.random() < c.click_rate:
            at = event_time + timedelta(seconds=rng.uniform(0, c.max_click_delay.total_seconds()))
            click = {
                "click_id": f"c{c.seed}-{n:08d}",
                "user_id": impression["user_id"],
                "ad_id": impression["ad_id"],
                "click_time": iso(at),
            }
            r = rng.random()
            kind = "late" if r < c.late_fraction else "valid"
            send_at = at + c.late_delay if kind == "late" else at
            heapq.heappush(self._pending, (send_at, n, kind, click))
            if c.late_fraction <= r < c.late_fraction + c.duplicate_fraction:
                heapq.heappush(
                    self._pending, (send_at + timedelta(seconds=1), n, "duplicate", click)
                )
        return impression

    def _due_clicks(self, until: datetime | None) -> Iterator[tuple[str, GeneratedRecord]]:
        while self._pending and (until is None or self._pending[0][0] <= until):
            _, _, kind, click = heapq.heappop(self._pending)
            yield CLICKS, GeneratedRecord(click["click_id"], to_json(click), kind, data=click)

    def stream(self, impressions: int) -> Iterator[tuple[str, GeneratedRecord]]:
        """``impressions`` impression records, each preceded by the clicks now due, then
        every click still pending."""
        for _ in range(impressions):
            record = self.next_record()
            yield from self._due_clicks(self._clock)
            yield IMPRESSIONS, record
        yield from self._due_clicks(None)
