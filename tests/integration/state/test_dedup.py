"""eventlake's timer-evicted de-duplication keeps exactly the rows Spark's
``dropDuplicatesWithinWatermark`` keeps: batch by batch, each batch a query restarted from
its checkpoint, through late rows, expiry at the watermark, sub-millisecond times, a null
key and a null event time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.state.dedup import drop_duplicates_within_watermark

pytestmark = pytest.mark.integration

SCHEMA = "id STRING, ts TIMESTAMP, v INT"
DAY = "2026-01-01T00:"

# Watermark delay 10 s; the watermark after a batch is its max event time (in whole ms)
# less 10 s, and a key's state expires once the watermark reaches its first row's time
# plus 10 s. Comments give the watermark each batch starts with.
BATCHES: list[list[tuple[str | None, str | None, int]]] = [
    # none yet: a is kept once (the batch holds it twice), b kept; the null key kept.
    [("a", "00:00", 1), ("b", "00:05", 1), ("a", "00:00", 1), (None, "00:06", 1)],
    # 23:59:55: a and the null key are held (until 00:10, 00:16): dropped. c kept; n,
    # without an event time, kept (Spark counts it as 1970: it expires in this batch).
    [("a", "00:08", 2), ("c", "00:30", 1), (None, "00:07", 2), ("n", None, 1)],
    # 00:20 (a, b and the null key expired): a kept again; b is late (15 < 20): dropped;
    # d, x, the null key and n kept.
    [
        ("a", "00:25", 3),
        ("b", "00:15", 2),
        ("d", "00:40", 1),
        ("x", "00:30.0005", 1),
        (None, "00:26", 3),
        ("n", None, 2),
    ],
    # 00:30: c is held (expires at 00:40): dropped; e kept.
    [("c", "00:45", 2), ("e", "00:50.0005", 1)],
    # 00:40.000 (c expired at exactly 00:40; x expires at 00:40.0005, still held):
    # x and e dropped, f kept.
    [("x", "00:45", 2), ("e", "01:00", 2), ("f", "01:10", 1)],
    # 01:00.000 (x expired; e expires at 01:00.0005, still held): x kept, e dropped, g kept.
    [("x", "01:05", 3), ("e", "01:05", 3), ("g", "01:10.001", 1)],
    # 01:00.001 (e expired): e kept; c (expired at 00:40) kept.
    [("e", "01:06", 4), ("c", "01:06", 3)],
]
KEPT = {
    ("a", "00:00", 1), ("b", "00:05", 1), (None, "00:06", 1), ("c", "00:30", 1),
    ("n", None, 1), ("a", "00:25", 3), (None, "00:26", 3), ("n", None, 2),
    ("d", "00:40", 1), ("x", "00:30.0005", 1), ("e", "00:50.0005", 1), ("f", "01:10", 1),
    ("x", "01:05", 3), ("g", "01:10.001", 1), ("e", "01:06", 4), ("c", "01:06", 3),
}  # fmt: skip


def _micros(clock: str | None) -> int | None:
    if clock is None:
        return None
    minutes, seconds = clock.split(":")
    return round((int(minutes) * 60 + float(seconds)) * 1_000_000)


def _rows(spark: SparkSession, table: Path) -> set[tuple[str | None, int | None, int]]:
    df = spark.read.format("delta").load(str(table))
    base = "unix_micros(timestamp'2026-01-01 00:00:00')"
    picked = df.selectExpr("id", f"unix_micros(ts) - {base}", "v")
    return {(r[0], r[1], r[2]) for r in picked.collect()}


def test_keeps_the_rows_spark_keeps_through_late_rows_and_expiry(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()

    def run(name: str, dedup: object) -> set[tuple[str | None, int | None, int]]:
        df = spark.readStream.schema(SCHEMA).json(str(source)).withWatermark("ts", "10 seconds")
        out = dedup(df)  # type: ignore[operator]
        query = (
            out.writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / name / "checkpoint"))
            .trigger(availableNow=True)
            .start(str(tmp_path / name / "table"))
        )
        query.awaitTermination(300)
        assert query.exception() is None
        return _rows(spark, tmp_path / name / "table")

    for n, batch in enumerate(BATCHES):
        rows = [{"id": i, "ts": t and f"{DAY}{t}", "v": v} for i, t, v in batch]
        (source / f"{n:02d}.json").write_text("\n".join(json.dumps(r) for r in rows))
        by_spark = run("spark", lambda df: df.dropDuplicatesWithinWatermark(["id"]))
        ours = run("timers", lambda df: drop_duplicates_within_watermark(df, ["id"]))
        assert ours == by_spark, f"after batch {n}"
    assert ours == {(i, _micros(t), v) for i, t, v in KEPT}


def test_keeps_every_column_and_groups_by_several_keys(spark: SparkSession, tmp_path: Path) -> None:
    rows = [
        ("u1", "s1", 1, "2026-01-01 00:00:00"),
        ("u1", "s2", 2, "2026-01-01 00:00:01"),
        ("u1", "s1", 3, "2026-01-01 00:00:02"),
        ("u2", "s1", 4, "2026-01-01 00:00:03"),
    ]
    folder = tmp_path / "in"
    spark.createDataFrame(rows, "user STRING, session STRING, n INT, t STRING").selectExpr(
        "user", "session", "n", "cast(t as timestamp) as ts"
    ).coalesce(1).write.parquet(str(folder))
    df = spark.readStream.schema("user STRING, session STRING, n INT, ts TIMESTAMP").parquet(
        str(folder)
    )
    out = drop_duplicates_within_watermark(df.withWatermark("ts", "1 hour"), ["user", "session"])
    assert out.columns == ["user", "session", "n", "ts"]
    query = (
        out.writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(tmp_path / "table"))
    )
    query.awaitTermination(300)
    kept = spark.read.format("delta").load(str(tmp_path / "table")).collect()
    assert sorted((r.user, r.session) for r in kept) == [("u1", "s1"), ("u1", "s2"), ("u2", "s1")]
    assert {r.n for r in kept if (r.user, r.session) == ("u1", "s1")} <= {1, 3}


def test_refuses_a_batch_frame_or_one_without_one_watermark(spark: SparkSession) -> None:
    df: DataFrame = spark.readStream.format("rate").load()
    with pytest.raises(EventlakeError) as caught:
        drop_duplicates_within_watermark(df, ["value"])
    assert caught.value.code == ErrorCode.PIPELINE_INVALID
    assert "found none" in str(caught.value)
    with pytest.raises(EventlakeError) as caught:
        drop_duplicates_within_watermark(df.withWatermark("timestamp", "1 minute"), ["nope"])
    assert "no column nope" in str(caught.value)
    with pytest.raises(EventlakeError) as caught:
        drop_duplicates_within_watermark(spark.range(3).selectExpr("id", "now() as ts"), ["id"])
    assert "batch frame" in str(caught.value)
