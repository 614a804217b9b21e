"""An independent computation of the orders pipeline's tables from the generator's truth.

Plain Python and pandas over the generated records, never Spark: what each table must hold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pandas as pd

from eventlake.generator import GeneratedRecord

HOUR = timedelta(hours=1)
HALF_HOUR = timedelta(minutes=30)
WINDOW_DELAY = timedelta(minutes=10)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class Expected:
    silver: dict[str, dict[str, Any]]  # order_id -> order
    silver_phase: dict[str, int]
    quarantine: Counter[tuple[str | None, str]]  # (key, reason)
    duplicates_removed: int


def expected_silver(phases: list[list[GeneratedRecord]]) -> Expected:
    silver: dict[str, dict[str, Any]] = {}
    phase_of: dict[str, int] = {}
    quarantine: Counter[tuple[str | None, str]] = Counter()
    dups = 0
    for phase, records in enumerate(phases, start=1):
        for r in records:
            if r.kind == "malformed":
                assert r.reason is not None
                quarantine[(r.key, r.reason)] += 1
                continue
            assert r.data is not None
            oid = r.data["order_id"]
            if oid in silver:
                dups += 1
                continue
            silver[oid] = r.data
            phase_of[oid] = phase
    return Expected(silver, phase_of, quarantine, dups)


def silver_frame(exp: Expected) -> pd.DataFrame:
    """silver/orders as it must be: the valid orders once each, typed."""
    want = pd.DataFrame(list(exp.silver.values()))
    want["event_time"] = pd.to_datetime(want["event_time"], utc=True)
    want["amount"] = want["amount"].map(lambda a: Decimal(str(a)))
    return want


def _windows(ts: datetime, size: timedelta, slide: timedelta) -> list[tuple[datetime, datetime]]:
    epoch = datetime(1970, 1, 1, tzinfo=ts.tzinfo)
    last_start = epoch + ((ts - epoch) // slide) * slide
    out = []
    start = last_start
    while start + size > ts:
        out.append((start, start + size))
        start -= slide
    return out


def expected_gold(exp: Expected, size: timedelta, slide: timedelta) -> tuple[pd.DataFrame, int]:
    """Rows of a windowed count/sum per category as Spark's append mode emits them.

    Each phase is one micro-batch of the gold query: a row of phase N > 1 is dropped from a
    window the watermark of the previous phases already closed (window end <= watermark).
    Only windows the final watermark closed are emitted. Returns (rows, rows dropped).
    """
    by_phase: dict[int, list[dict[str, Any]]] = {}
    for oid, order in exp.silver.items():
        by_phase.setdefault(exp.silver_phase[oid], []).append(order)
    max_seen: datetime | None = None
    rows = []
    dropped = 0
    for phase in sorted(by_phase):
        watermark = (max_seen - WINDOW_DELAY) if max_seen else None
        for order in by_phase[phase]:
            ts = parse_time(order["event_time"])
            for start, end in _windows(ts, size, slide):
                if watermark is not None and end <= watermark:
                    dropped += 1
                    continue
                rows.append(
                    {
                        "window_start": start,
                        "window_end": end,
                        "category": order["category"],
                        "amount": Decimal(str(order["amount"])),
                    }
                )
        latest = max(parse_time(o["event_time"]) for o in by_phase[phase])
        max_seen = latest if max_seen is None else max(max_seen, latest)
    assert max_seen is not None
    final = max_seen - WINDOW_DELAY
    df = pd.DataFrame(rows)
    df = df[df["window_end"] <= final]
    gold = (
        df.groupby(["window_start", "window_end", "category"])
        .agg(order_count=("amount", "size"), total_amount=("amount", "sum"))
        .reset_index()
    )
    return gold, dropped


def as_set(df: pd.DataFrame, columns: list[str]) -> Counter[tuple[Any, ...]]:
    """A multiset of rows, timestamps as UTC ISO text, decimals normalised."""

    def norm(v: Any) -> Any:
        if isinstance(v, pd.Timestamp | datetime):
            ts = pd.Timestamp(v)
            ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
            return ts.isoformat()
        if isinstance(v, Decimal):
            return v.quantize(Decimal("0.01"))
        if hasattr(v, "item"):
            return v.item()
        return v

    return Counter(tuple(norm(v) for v in row) for row in df[columns].itertuples(index=False))
