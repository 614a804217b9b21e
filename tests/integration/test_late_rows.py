"""Late rows kept: the rows each flow's watermark dropped are in ``<table>_late``, as many
per batch as Spark counted, judged the way each operator drops them; a batch the keeper
never looked at (the run died first) is replayed at the next start, and once only."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from eventlake.config import Settings
from eventlake.kafka import produce
from eventlake.monitoring import BatchProgress, ProgressListener
from eventlake.operations.late_rows import MARK_FILE
from eventlake.pipelines.runner import RunResult
from eventlake.run import run_pipeline
from eventlake.testing import read_delta, settings_for
from tests.integration.late_pipeline import late

pytestmark = pytest.mark.integration


def _event(id_: str, user: str, ts: str) -> tuple[str, str]:
    return id_, json.dumps({"id": id_, "user": user, "ts": f"2026-01-01T{ts}Z"})


def _at(ts: str) -> datetime:
    return datetime.fromisoformat(f"2026-01-01T{ts}+00:00").astimezone(UTC)


def _run(
    settings: Settings, flows: list[str] | None = None
) -> tuple[RunResult, dict[tuple[str, int], int]]:
    """An available-now run; Spark's numRowsDroppedByWatermark per (flow, batch)."""
    dropped: dict[tuple[str, int], int] = {}

    def seen(p: BatchProgress) -> None:
        if p.dropped_by_watermark:
            dropped[(p.query, p.batch_id)] = p.dropped_by_watermark

    listener = ProgressListener(show=False)
    listener.observers.append(seen)
    try:
        result = run_pipeline(late, settings, trigger="available-now", flows=flows,
                              listener=listener)  # fmt: skip
    finally:
        listener.close()
    return result, dropped


def _rows(path: Path) -> list[dict[str, Any]]:
    return sorted(read_delta(path).to_pylist(), key=lambda r: (r["batch_id"], r["row"]))


def _ids(rows: list[dict[str, Any]]) -> list[str]:
    return [json.loads(r["row"])["id"] for r in rows]


def _per_batch(rows: list[dict[str, Any]], *key: str) -> dict[int, int]:
    """Distinct (``key`` columns, row's user) per batch: Spark's count of dropped groups."""
    groups: dict[int, set[tuple[Any, ...]]] = {}
    for r in rows:
        group = (*(r[k] for k in key), json.loads(r["row"])["user"]) if key else (r["row"],)
        groups.setdefault(r["batch_id"], set()).add(group)
    return {b: len(g) for b, g in groups.items()}


def test_late_rows_are_kept_per_operator_and_replayed_once_after_a_death(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    settings = settings_for(tmp_path, bootstrap, late={"topic": topic})
    lake = tmp_path / "lake"
    first_events = [("e1", "a", "00:01:00"), ("e2", "a", "00:04:00"), ("e3", "b", "00:08:00"),
                    ("e4", "a", "00:30:00")]  # fmt: skip
    produce(bootstrap, topic, [_event(*e) for e in first_events])
    first, dropped = _run(settings)
    assert not dropped
    assert not first.late_rows_kept
    # The watermarks are now 00:25 (00:30 - 5 minutes) and, for sessions, 00:29.
    produce(bootstrap, topic, [
        _event("e5", "b", "00:02:00"),  # behind every watermark
        _event("e6", "c", "00:22:00"),  # dedup: late; sliding: only window 00:15-00:25 is
        _event("e4", "a", "00:30:00"),  # a duplicate, not late
        _event("e7", "a", "00:33:00"),
        _event("e8", "d", "00:26:00"),  # sessions: its session ends 00:29, so late
        _event("e9", "f", "00:27:30"),  # on time everywhere (its session ends 00:30:30)
    ])  # fmt: skip
    second, dropped = _run(settings)

    # De-duplication drops a row at or behind the previous batch's watermark.
    dedup = _rows(lake / "silver" / "events_late")
    assert _ids(dedup) == ["e5", "e6"]
    assert {r["watermark"] for r in dedup} == {_at("00:25:00")}
    assert [r["event_time"] for r in dedup] == [_at("00:02:00"), _at("00:22:00")]
    assert _per_batch(dedup) == {b: n for (q, b), n in dropped.items() if q == "late.deduplicated"}
    assert sum(_per_batch(dedup).values()) == 2

    # Sliding windows: one late row per closed window the row falls in; Spark counts
    # the dropped (window, user) groups.
    windows = _rows(lake / "gold" / "sliding_late")
    pairs = sorted((_ids([r])[0], r["window_start"], r["window_end"]) for r in windows)
    assert pairs == [
        ("e5", datetime(2025, 12, 31, 23, 55, tzinfo=UTC), _at("00:05:00")),
        ("e5", _at("00:00:00"), _at("00:10:00")),
        ("e6", _at("00:15:00"), _at("00:25:00")),
    ]
    spark_sliding = {b: n for (q, b), n in dropped.items() if q == "late.sliding"}
    assert _per_batch(windows, "window_start", "window_end") == spark_sliding
    assert sum(spark_sliding.values()) == 3

    # Sessions (from the de-duplicated table): a row is late when its own session, event
    # time plus the gap, ended at or behind the watermark, not when its event time did.
    sessions = _rows(lake / "gold" / "sessions_late")
    assert _ids(sessions) == ["e8"]
    assert {r["watermark"] for r in sessions} == {_at("00:29:00")}
    spark_sessions = {b: n for (q, b), n in dropped.items() if q == "late.sessions"}
    assert _per_batch(sessions) == spark_sessions == {sessions[0]["batch_id"]: 1}

    # Opted out: Spark dropped the same two rows, and no table keeps them.
    assert sum(n for (q, _), n in dropped.items() if q == "late.opted_out") == 2
    assert not (lake / "silver" / "events_raw_late").exists()
    assert second.late_rows_kept == {"late.deduplicated": 2, "late.sliding": 3,
                                     "late.sessions": 1}  # fmt: skip

    # A run that died after committing batch N and before looking at it leaves the mark
    # behind N: the next start replays N. Without the table, the rows come back...
    checkpoint = tmp_path / "checkpoints" / "late" / "deduplicated"
    batch = max(b for q, b in dropped if q == "late.deduplicated")
    (checkpoint / MARK_FILE).write_text(json.dumps({"checked": batch - 1}))
    shutil.rmtree(lake / "silver" / "events_late")
    third, _ = _run(settings, ["deduplicated"])
    assert _ids(_rows(lake / "silver" / "events_late")) == ["e5", "e6"]
    assert third.late_rows_kept == {"late.deduplicated": 2}
    # ... and with them, a second replay writes nothing (the append is tagged by batch).
    (checkpoint / MARK_FILE).write_text(json.dumps({"checked": batch - 1}))
    fourth, _ = _run(settings, ["deduplicated"])
    assert fourth.late_rows_kept.get("late.deduplicated", 0) == 0
    assert _ids(_rows(lake / "silver" / "events_late")) == ["e5", "e6"]


def test_lateness_measured_on_two_threads_while_late_rows_are_kept(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Watermarks are recorded per build of a transform, not by patching pyspark: two
    threads measuring lateness during a run that keeps late rows get what one measurement
    alone gets, the run keeps the same late rows, and DataFrame is left untouched."""
    import threading

    from pyspark.sql import DataFrame

    from eventlake.operations.lateness_report import Lateness, measure_lateness

    frame = type(spark.range(1))
    own = (frame.withWatermark, frame.groupBy, DataFrame.withWatermark, DataFrame.groupBy)
    topic = make_topic(partitions=2)
    settings = settings_for(tmp_path, bootstrap, late={"topic": topic})
    produce(bootstrap, topic, [_event("e1", "a", "00:01:00"), _event("e4", "a", "00:30:00")])
    _run(settings, ["deduplicated", "sliding"])
    produce(bootstrap, topic, [_event("e5", "b", "00:02:00"), _event("e6", "c", "00:22:00"),
                               _event("e7", "a", "00:33:00")])  # fmt: skip
    flows = ("deduplicated", "sliding")
    alone = {f: measure_lateness(late, f, settings, spark) for f in flows}
    # e5 and e6 are behind the newest event before them by more than the delay (e1 too,
    # when e4 arrived first on the other partition).
    assert [r.records for f in flows for r in alone[f]] == [5, 5]
    assert all(r.dropped >= 2 for f in flows for r in alone[f])

    measured: dict[str, list[list[Lateness]]] = {f: [] for f in flows}
    errors: list[BaseException] = []
    running = threading.Event()
    running.set()

    def measure(flow: str) -> None:
        try:
            while running.is_set() or not measured[flow]:
                measured[flow].append(measure_lateness(late, flow, settings, spark))
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=measure, args=(f,)) for f in flows]
    for t in threads:
        t.start()
    try:
        result, _ = _run(settings, list(flows))
    finally:
        running.clear()
        for t in threads:
            t.join(300)
    assert errors == []
    for flow in flows:
        assert measured[flow]
        assert all(m == alone[flow] for m in measured[flow])
    assert result.late_rows_kept == {"late.deduplicated": 2, "late.sliding": 3}
    lake = tmp_path / "lake"
    assert _ids(_rows(lake / "silver" / "events_late")) == ["e5", "e6"]
    windows = _rows(lake / "gold" / "sliding_late")
    assert sorted((_ids([r])[0], r["window_end"]) for r in windows) == [
        ("e5", _at("00:05:00")), ("e5", _at("00:10:00")), ("e6", _at("00:25:00"))]  # fmt: skip
    after = (frame.withWatermark, frame.groupBy, DataFrame.withWatermark, DataFrame.groupBy)
    assert after == own
