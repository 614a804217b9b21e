"""Reproducible event generators for demos, tests and benchmarks."""

from __future__ import annotations

from eventlake.generator.orders import CATEGORIES, REGIONS, generate_orders, order_records

__all__ = ["CATEGORIES", "REGIONS", "generate_orders", "order_records"]
