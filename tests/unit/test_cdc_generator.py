"""The CDC generator: reproducible, Debezium-shaped, with every kind of trouble."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise

from eventlake.generator import CdcConfig, CdcGenerator, cdc_records
from eventlake.generator.cdc import MALFORMED_REASONS

CONFIG = CdcConfig(seed=3, users=15, out_of_order_fraction=0.15, duplicate_fraction=0.1,
                   malformed_fraction=0.05)  # fmt: skip


def test_same_seed_same_records_and_exact_count() -> None:
    first = cdc_records(500, CONFIG)
    assert len(first) == 500
    assert first == cdc_records(500, CONFIG)
    assert first != cdc_records(500, CdcConfig(seed=4, users=15))


def test_every_kind_appears() -> None:
    kinds = Counter(r.kind for r in cdc_records(2000, CONFIG))
    assert set(kinds) == {"valid", "tombstone", "duplicate", "out_of_order", "malformed"}
    reasons = {r.reason for r in cdc_records(2000, CONFIG) if r.reason}
    assert reasons == set(MALFORMED_REASONS)


def test_deletes_are_debezium_shaped_and_followed_by_a_tombstone() -> None:
    records = cdc_records(1000, CONFIG)
    deletes = 0
    for i, record in enumerate(records[:-1]):
        if record.kind != "valid" or record.data is None or record.data["op"] != "d":
            continue
        deletes += 1
        assert record.data["after"] is None
        assert record.data["before"]["user_id"] == json.loads(record.key or "")["user_id"]
        tombstone = records[i + 1]
        assert (tombstone.kind, tombstone.key, tombstone.value) == ("tombstone", record.key, None)
    assert deletes > 0


def test_out_of_order_events_go_back_in_time() -> None:
    records = [r for r in cdc_records(1000, CONFIG) if r.data is not None]
    times = [r.data["source"]["ts_ms"] for r in records if r.data]
    assert any(later < earlier for earlier, later in pairwise(times))


def test_a_long_stream_holds_bounded_memory() -> None:
    """A generator feeding a pipeline for days keeps what duplicates need, not every
    record it emitted (the soak saw ~230 MiB an hour at 50 changes/s)."""
    import itertools
    import tracemalloc

    records = CdcGenerator(CdcConfig(seed=3, users=500)).records(10**9)
    tracemalloc.start()
    try:
        for _ in itertools.islice(records, 2_000):
            pass
        before, _ = tracemalloc.get_traced_memory()
        for _ in itertools.islice(records, 20_000):
            pass
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 512 * 1024, after - before
