"""The pipelines eventlake ships; importing this package registers them."""

from __future__ import annotations

from eventlake.reference import ads, clickstream, orders, sensors, users

__all__ = ["ads", "clickstream", "orders", "sensors", "users"]
