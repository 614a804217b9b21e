"""Processing time without a new class per micro-batch: ``current_timestamp()`` makes
Spark compile a flow's code at every batch (the batch's time is a constant in it);
``processing_time`` keeps the code the same, and each row's time is when it was read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from itertools import pairwise
from pathlib import Path

import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eventlake.connectors import kafka_records
from eventlake.kafka import produce
from eventlake.testing import codegen_compilations, read_delta, unique_name, wait_until

pytestmark = pytest.mark.integration

#: Batches after the first few (the first plan compiles everything once).
MEASURED = 4


def _rows(table: Path) -> int:
    committed = any((table / "_delta_log").glob("*.json"))
    return read_delta(table).num_rows if committed else 0


def _compiled_per_batch(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    lake: Path,
    stamp: Callable[[DataFrame], Column] | None = None,
) -> tuple[list[int], Path]:
    """Compilations in each of MEASURED batches of a Kafka -> Delta stream of
    :func:`kafka_records` (``ingested_at`` from ``stamp`` when given; one record produced
    before each batch), after two warm-up batches; and the table written."""
    raw = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    records = kafka_records(raw)
    if stamp is not None:
        records = records.withColumn("ingested_at", stamp(raw))
    table = lake / unique_name("clock")
    query = (
        records.writeStream.format("delta")
        .option("checkpointLocation", str(table.with_name(f"{table.name}-checkpoint")))
        .trigger(processingTime="200 milliseconds")
        .start(str(table))
    )
    counts: list[int] = []
    try:
        for batch in range(2 + MEASURED):
            produce(bootstrap, topic, [(f"k{batch}", f"v{batch}")])
            wait_until(
                lambda b=batch: _rows(table) > b,
                timeout=60,
                what=f"record {batch} in the table",
            )
            counts.append(codegen_compilations(spark))
    finally:
        query.stop()
    per_batch = [after - before for before, after in pairwise(counts[1:])]
    return per_batch, table


def test_current_timestamp_compiles_at_every_batch(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], lake: Path
) -> None:
    per_batch, table = _compiled_per_batch(
        spark, bootstrap, make_topic(), lake, lambda raw: F.current_timestamp()
    )
    rows = read_delta(table).to_pylist()
    assert len(rows) == 2 + MEASURED
    assert all(n > 0 for n in per_batch), per_batch


def test_processing_time_keeps_the_code_and_stamps_each_row(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], lake: Path
) -> None:
    started = datetime.now(timezone.utc)
    per_batch, table = _compiled_per_batch(spark, bootstrap, make_topic(), lake)
    rows = read_delta(table).to_pylist()
    ended = datetime.now(timezone.utc)
    assert per_batch == [0] * MEASURED
    # Never null, as current_timestamp(): eventlake's tables created before (with the
    # frame's schema, so NOT NULL) take the rows as they are.
    raw = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    assert not kafka_records(raw.option("subscribe", "t").load()).schema["ingested_at"].nullable
    assert len(rows) == 2 + MEASURED
    for row in rows:
        stamped = row["ingested_at"]
        assert started <= stamped <= ended
        assert stamped >= row["kafka_timestamp"], row
    assert len({row["ingested_at"] for row in rows}) == len(rows)
