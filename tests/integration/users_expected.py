"""The users pipeline's expected tables, computed in plain Python from the generated events.

Independent of Spark: events are ordered per user by (source.ts_ms, send order); all of a
user's records go to one partition, so send order is Kafka offset order.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from eventlake.generator import GeneratedRecord

FIELDS = ("name", "email", "country", "tier")


def _ts(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).replace(tzinfo=None)


def _instants(records: list[GeneratedRecord]) -> dict[int, list[tuple[int, dict[str, Any]]]]:
    """Per user: (ts, event) for each instant, the last-sent event winning a tie."""
    per_user: dict[int, dict[int, tuple[int, dict[str, Any]]]] = {}
    for seq, record in enumerate(records):
        if record.kind == "malformed" or record.value is None or record.data is None:
            continue
        event = record.data
        image = event["before"] if event["op"] == "d" else event["after"]
        ts = int(event["source"]["ts_ms"])
        per_user.setdefault(int(image["user_id"]), {})[ts] = (seq, event)
    return {
        user: [(ts, ev) for ts, (_, ev) in sorted(instants.items())]
        for user, instants in per_user.items()
    }


def _fields(event: dict[str, Any]) -> tuple[Any, ...]:
    image = event["before"] if event["op"] == "d" else event["after"]
    return tuple(image[f] for f in FIELDS)


def expected_users(records: list[GeneratedRecord]) -> dict[int, tuple[Any, ...]]:
    """SCD1: user_id -> (name, email, country, tier, updated_at) for users not deleted."""
    out = {}
    for user, instants in _instants(records).items():
        ts, event = instants[-1]
        if event["op"] != "d":
            out[user] = (*_fields(event), _ts(ts))
    return out


def expected_history(records: list[GeneratedRecord]) -> Counter[tuple[Any, ...]]:
    """SCD2 rows: (user_id, fields..., valid_from, valid_to, is_current)."""
    rows: Counter[tuple[Any, ...]] = Counter()
    for user, instants in _instants(records).items():
        for i, (ts, event) in enumerate(instants):
            if event["op"] == "d":
                continue
            following = instants[i + 1][0] if i + 1 < len(instants) else None
            valid_to = _ts(following) if following is not None else None
            rows[(user, *_fields(event), _ts(ts), valid_to, following is None)] += 1
    return rows


def expected_quarantine(records: list[GeneratedRecord]) -> Counter[str]:
    return Counter(r.reason for r in records if r.kind == "malformed" and r.reason)
