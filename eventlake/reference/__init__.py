"""The pipelines eventlake ships; importing this package registers them."""

from __future__ import annotations

from eventlake.reference import orders, users

__all__ = ["orders", "users"]
