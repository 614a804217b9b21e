"""Plain PySpark: seed 002's golden query as a user copies it, on Spark's defaults.

``python -m bench.variants.plain_spark BOOTSTRAP TOPIC OUT [--tuned]``. The jars come by
path (Kafka source, Delta) as for eventlake. ``--tuned`` sets what a Spark expert would:
shuffle partitions = cores, RocksDB state, no offsets bound.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eventlake.jars import SPARK_JARS, jar_files

SCHEMA = "user_id STRING, event_id STRING, event_type STRING, page STRING, event_time TIMESTAMP"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("out", type=Path)
    parser.add_argument("--tuned", action="store_true")
    args = parser.parse_args()
    builder = (
        SparkSession.builder.master("local[*]")
        .config("spark.jars", ",".join(str(j) for j in jar_files(SPARK_JARS)))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.sql.session.timeZone", "UTC")
    )
    if args.tuned:
        builder = builder.config("spark.sql.shuffle.partitions", str(os.cpu_count())).config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    t0 = time.perf_counter()
    stream_df = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("data"))
        .select("data.*")
        .withColumn("processing_time", F.current_timestamp())
        .withWatermark("event_time", "10 minutes")
    )
    windowed = stream_df.groupBy(
        F.window(F.col("event_time"), "10 minutes", "5 minutes"), F.col("user_id")
    ).agg(F.count("*").alias("events"))
    table = args.out / "events_agg"
    query = (
        windowed.select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "user_id",
            "events",
        )
        .writeStream.format("delta")
        .option("checkpointLocation", str(args.out / "checkpoint"))
        .outputMode("append")
        .trigger(availableNow=True)
        .start(str(table))
    )
    query.awaitTermination()
    query_s = time.perf_counter() - t0
    progress = query.recentProgress
    print(
        json.dumps(
            {
                "rows_in": sum(int(p["numInputRows"]) for p in progress),
                "batches": len(progress),
                "query_seconds": round(query_s, 2),
                "output": str(table),
                "format": "delta",
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    main()
