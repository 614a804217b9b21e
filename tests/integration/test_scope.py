"""The run scope's batch memo on a real session: a snapshot per batch, released after."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from eventlake.scope import BatchMemo


def _held(spark: SparkSession, *frames: DataFrame) -> list[bool]:
    """Whether Spark still holds each memo frame's blocks (the RDD its plan reads)."""
    held = spark.sparkContext._jsc.sc().getPersistentRDDs()
    return [bool(held.contains(f._jdf.logicalPlan().rdd().id())) for f in frames]


def test_a_memo_is_a_snapshot_that_writes_elsewhere_neither_change_nor_wait_for(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = str(tmp_path / "bronze")
    spark.range(1_000).selectExpr("id", "id % 10 AS user").write.format("delta").save(table)
    memo = BatchMemo()

    def changes() -> DataFrame:
        return spark.read.format("delta").load(table).where("user < 3")

    def latest(batch: tuple[str, int]) -> DataFrame:
        # One memo's build asking for another (users: latest state from the changes).
        of = memo.get("p.silver", "changes", batch, changes)
        return of.groupBy("user").max("id")

    first = memo.get("p.silver", "latest", ("s", 1), lambda: latest(("s", 1)))
    assert memo.get("p.silver", "latest", ("s", 1), lambda: spark.range(0)) is first
    # Another flow appends to the table the memo read, in the middle of the batch: the
    # memo's targets still see the batch's snapshot (a persisted frame is re-cached).
    spark.range(1_000, 1_300).selectExpr("id", "id % 10 AS user").write.format("delta").mode(
        "append"
    ).save(table)
    changes_1 = memo.get("p.silver", "changes", ("s", 1), changes)
    assert changes_1.count() == 300
    assert {r["user"]: r["max(id)"] for r in first.collect()} == {0: 990, 1: 991, 2: 992}
    assert _held(spark, first, changes_1) == [True, True]

    second = memo.get("p.silver", "latest", ("s", 2), lambda: latest(("s", 2)))
    assert {r["user"]: r["max(id)"] for r in second.collect()} == {0: 1290, 1: 1291, 2: 1292}
    changes_2 = memo.get("p.silver", "changes", ("s", 2), changes)
    assert _held(spark, first, changes_1, second, changes_2) == [False, False, True, True]
    memo.close()
    assert _held(spark, second, changes_2) == [False, False]
