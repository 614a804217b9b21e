"""Reproducible event generators for demos, tests and benchmarks."""

from __future__ import annotations

from eventlake.generator.base import GeneratedRecord, paced, send
from eventlake.generator.cdc import CdcConfig, CdcGenerator, cdc_records
from eventlake.generator.orders import (
    CATEGORIES,
    REGIONS,
    OrdersConfig,
    OrdersGenerator,
    generate_orders,
    order_records,
)

__all__ = [
    "CATEGORIES",
    "REGIONS",
    "CdcConfig",
    "CdcGenerator",
    "GeneratedRecord",
    "OrdersConfig",
    "OrdersGenerator",
    "cdc_records",
    "generate_orders",
    "order_records",
    "paced",
    "send",
]
