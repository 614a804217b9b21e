"""Debezium-shaped change events for a ``users`` table: the input of the ``users`` pipeline.

Each record is keyed ``{"user_id": N}`` (so all changes of a user share a partition) and
valued like Debezium's JSON converter without schemas: ``before``, ``after``, ``op``
(``c`` create, ``u`` update, ``d`` delete, ``r`` snapshot read), ``ts_ms`` and ``source``
with the database commit time ``source.ts_ms``. A delete has ``after: null`` and the old
row in ``before``, and is followed by a tombstone: the same key with a null value.

Reproducible by seed. Changes happen on a simulated clock in order; they are *emitted*
with some out of order (held back behind later changes), some twice, and some malformed.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from eventlake.generator.base import GeneratedRecord

DEFAULT_START = datetime(2026, 1, 1, tzinfo=timezone.utc)
COUNTRIES = ("DE", "FR", "NL", "SE", "US", "BR", "IN", "JP")
TIERS = ("free", "pro", "team", "enterprise")
FIRST = ("Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia")
MALFORMED_REASONS = (
    "invalid_json",
    "invalid_op",
    "missing_after",
    "missing_before",
    "missing_user_id",
    "missing_source_ts",
)


@dataclass(frozen=True)
class CdcConfig:
    seed: int = 0
    #: Size of the key space: user ids 1..users.
    users: int = 50
    start: datetime = DEFAULT_START
    mean_gap_ms: int = 1000
    #: Of the changes to an existing user, the share that deletes it (the rest update).
    delete_fraction: float = 0.15
    #: Records held back and emitted after 1-6 later records.
    out_of_order_fraction: float = 0.1
    duplicate_fraction: float = 0.05
    malformed_fraction: float = 0.02
    #: Emit the first change of each user as a snapshot read (``r``) instead of ``c``.
    snapshot: bool = False


class CdcGenerator:
    def __init__(self, config: CdcConfig | None = None) -> None:
        self.config = config or CdcConfig()
        self.rng = random.Random(self.config.seed)
        self.clock_ms = int(self.config.start.timestamp() * 1000)
        self.rows: dict[int, dict[str, Any]] = {}
        self.lsn = 0

    def _row(self, user_id: int, old: dict[str, Any] | None) -> dict[str, Any]:
        rng = self.rng
        row = dict(old) if old else {
            "user_id": user_id,
            "name": f"{rng.choice(FIRST)} {user_id}",
            "email": f"user{user_id}@example.com",
            "country": rng.choice(COUNTRIES),
            "tier": "free",
        }  # fmt: skip
        if old:
            field = rng.choice(("email", "country", "tier", "name"))
            if field == "email":
                row["email"] = f"user{user_id}.{rng.randrange(10**6)}@example.com"
            elif field == "country":
                row["country"] = rng.choice(COUNTRIES)
            elif field == "tier":
                row["tier"] = rng.choice(TIERS)
            else:
                row["name"] = f"{rng.choice(FIRST)} {user_id}"
        return row

    def _event(self, op: str, before: Any, after: Any) -> dict[str, Any]:
        self.lsn += 1
        return {
            "before": before,
            "after": after,
            "op": op,
            "ts_ms": self.clock_ms + self.rng.randrange(5, 500),
            "source": {
                "version": "2.7.0.Final", "connector": "postgresql", "name": "app",
                "ts_ms": self.clock_ms, "db": "app", "schema": "public", "table": "users",
                "lsn": self.lsn,
            },
        }  # fmt: skip

    def changes(self) -> Iterator[list[GeneratedRecord]]:
        """Changes in commit order; a delete comes with its tombstone."""
        seen: set[int] = set()
        while True:
            self.clock_ms += max(1, int(self.rng.expovariate(1 / self.config.mean_gap_ms)))
            user_id = self.rng.randint(1, self.config.users)
            key = json.dumps({"user_id": user_id})
            old = self.rows.get(user_id)
            if old is not None and self.rng.random() < self.config.delete_fraction:
                event = self._event("d", old, None)
                del self.rows[user_id]
                yield [
                    GeneratedRecord(key, json.dumps(event), "valid", data=event),
                    GeneratedRecord(key, None, "tombstone"),
                ]
                continue
            new = self._row(user_id, old)
            op = "u" if old else ("r" if self.config.snapshot and user_id not in seen else "c")
            seen.add(user_id)
            self.rows[user_id] = new
            event = self._event(op, old, new)
            yield [GeneratedRecord(key, json.dumps(event), "valid", data=event)]

    def _malformed(self) -> GeneratedRecord:
        rng = self.rng
        reason = rng.choice(MALFORMED_REASONS)
        user_id = rng.randint(1, self.config.users)
        key = json.dumps({"user_id": user_id})
        row = {"user_id": user_id, "name": "x", "email": "x", "country": "DE", "tier": "free"}
        event = self._event("u", row, row)
        if reason == "invalid_json":
            return GeneratedRecord(key, '{"op": "u", "after": {', "malformed", reason)
        if reason == "invalid_op":
            event["op"] = rng.choice(("x", "update", ""))
        elif reason == "missing_after":
            event["after"] = None
        elif reason == "missing_before":
            event["op"], event["before"], event["after"] = "d", None, None
        elif reason == "missing_user_id":
            event["after"] = {k: v for k, v in row.items() if k != "user_id"}
        else:
            del event["source"]["ts_ms"]
        return GeneratedRecord(key, json.dumps(event), "malformed", reason)

    def records(self, count: int) -> Iterator[GeneratedRecord]:
        """``count`` records (tombstones included) in emission order."""
        cfg = self.config
        held: deque[tuple[int, GeneratedRecord]] = deque()
        # The last valid records, where duplicates come from (a run may last for days).
        emitted: deque[GeneratedRecord] = deque(maxlen=20)
        changes = self.changes()
        produced = 0

        def out(record: GeneratedRecord) -> Iterator[GeneratedRecord]:
            nonlocal produced
            if produced < count:
                produced += 1
                if record.kind == "valid":
                    emitted.append(record)
                yield record

        while produced < count:
            # Release held records whose wait is over.
            while held and held[0][0] <= produced:
                yield from out(held.popleft()[1])
            roll = self.rng.random()
            if roll < cfg.malformed_fraction:
                yield from out(self._malformed())
                continue
            if roll < cfg.malformed_fraction + cfg.duplicate_fraction and emitted:
                again = self.rng.choice(emitted)
                yield from out(
                    GeneratedRecord(again.key, again.value, "duplicate", data=again.data)
                )
                continue
            batch = next(changes)
            if (
                roll < cfg.malformed_fraction + cfg.duplicate_fraction + cfg.out_of_order_fraction
                and len(batch) == 1
            ):
                late = GeneratedRecord(batch[0].key, batch[0].value, "out_of_order",
                                       data=batch[0].data)  # fmt: skip
                held.append((produced + self.rng.randint(1, 6), late))
                continue
            for record in batch:
                yield from out(record)
        # Whatever is still held is dropped from this run: the count is exact.


def cdc_records(count: int, config: CdcConfig | None = None) -> list[GeneratedRecord]:
    return list(CdcGenerator(config).records(count))
