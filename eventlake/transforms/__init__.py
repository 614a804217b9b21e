"""Reusable DataFrame steps: parsing with quarantine reasons, windows."""

from __future__ import annotations

from eventlake.transforms.parsing import (
    checked_events,
    deduplicated_events,
    first_failure,
    from_json_bytes,
    parse_json,
    quarantine_rows,
)
from eventlake.transforms.windows import flatten_window, windowed

__all__ = [
    "checked_events",
    "deduplicated_events",
    "first_failure",
    "flatten_window",
    "from_json_bytes",
    "parse_json",
    "quarantine_rows",
    "windowed",
]
