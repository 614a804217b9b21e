"""Clickstream events: ``user_id``, ``event_id``, ``event_type``, ``page``, ``event_time``.

Users come and go: a few are active at a time, each browsing with short gaps, and an
active user is now and then replaced by another, so sessions (30-minute gap) open and
close within a short run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlake.generator.events import EventStream, EventStreamConfig, iso

EVENT_TYPES = ("page_view", "click", "scroll")
PAGES = ("/", "/search", "/product/1", "/product/2", "/product/3", "/cart", "/checkout", "/help")


@dataclass(frozen=True)
class ClicksConfig(EventStreamConfig):
    """Page views, clicks and scrolls of ``active_users`` users at a time, out of
    ``users``."""

    mean_gap_seconds: float = 20.0
    users: int = 40
    active_users: int = 4
    #: Chance, per event, that one active user leaves and another arrives.
    churn: float = 0.03


class ClicksGenerator(EventStream):
    key_field = "user_id"
    required_fields = ("event_id", "user_id", "event_time")
    bad_values = {"event_time": ("yesterday", "2026-13-45T99:00:00Z", "")}  # noqa: RUF012

    def __init__(self, config: ClicksConfig | None = None) -> None:
        self.config: ClicksConfig = config or ClicksConfig()
        super().__init__(self.config)
        c = self.config
        if not 0 < c.active_users <= c.users:
            raise ValueError("active_users must be between 1 and users")
        self._active = [f"u{i:03d}" for i in range(1, c.active_users + 1)]
        self._next_id = 0

    def _event(self, event_time: datetime) -> dict[str, Any]:
        rng, c = self._rng, self.config
        if rng.random() < c.churn:
            idle = [f"u{i:03d}" for i in range(1, c.users + 1) if f"u{i:03d}" not in self._active]
            if idle:
                self._active[rng.randrange(len(self._active))] = rng.choice(idle)
        event_id = f"e{c.seed}-{self._next_id:08d}"
        self._next_id += 1
        return {
            "user_id": rng.choice(self._active),
            "event_id": event_id,
            "event_type": rng.choices(EVENT_TYPES, weights=(5, 4, 1))[0],
            "page": rng.choice(PAGES),
            "event_time": iso(event_time),
        }
