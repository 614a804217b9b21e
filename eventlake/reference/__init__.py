"""The pipelines eventlake ships; importing this package registers them."""

from __future__ import annotations

from eventlake.reference import ads, alerts, clickstream, orders, sensors, users

__all__ = ["ads", "alerts", "clickstream", "orders", "sensors", "users"]
