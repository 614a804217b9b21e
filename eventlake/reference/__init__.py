"""The pipelines eventlake ships; importing this package registers them."""

from __future__ import annotations

from eventlake.reference import orders

__all__ = ["orders"]
