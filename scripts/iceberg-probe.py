"""Try an Iceberg Spark runtime on eventlake's Spark: a Hadoop catalog in a scratch
folder, then create, insert, read, a streaming write and a streaming read.

Usage (through make): ``make iceberg-probe [ICEBERG_VERSION=1.12.0] [ICEBERG_SPARK=4.1]``.
Prints one line per step, ``ok`` or the JVM exception; exits 1 when a step fails.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from eventlake.config import Settings
from eventlake.jars import SPARK_JARS, jar_files
from eventlake.session import spark_conf


def main(folder: str) -> int:
    runtime = sorted(Path(folder).glob("iceberg-spark-runtime-*.jar"))
    if not runtime:
        print(f"no iceberg-spark-runtime jar in {folder}", file=sys.stderr)
        return 2
    scratch = Path(tempfile.mkdtemp(prefix="iceberg-probe-"))
    builder = SparkSession.builder.master("local[2]").appName("iceberg-probe")
    for key, value in spark_conf(Settings().spark, jar_files(SPARK_JARS) + runtime).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    spark.conf.set("spark.sql.catalog.probe", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.probe.type", "hadoop")
    spark.conf.set("spark.sql.catalog.probe.warehouse", str(scratch / "warehouse"))
    print(f"Spark {spark.version}, {runtime[0].name}")

    def stream_write() -> object:
        rows = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
        query = (
            rows.selectExpr("value AS id", "CAST(value AS STRING) AS v")
            .writeStream.format("iceberg")
            .option("checkpointLocation", str(scratch / "cp-write"))
            .trigger(availableNow=True)
            .toTable("probe.db.t")
        )
        query.awaitTermination(120)
        return spark.table("probe.db.t").count()

    def stream_read() -> object:
        query = (
            spark.readStream.format("iceberg").load("probe.db.t")
            .writeStream.format("memory").queryName("probe_read")
            .option("checkpointLocation", str(scratch / "cp-read"))
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination(120)
        return spark.table("probe_read").count()

    create = "CREATE TABLE probe.db.t (id BIGINT, v STRING) USING iceberg"
    steps: list[tuple[str, Callable[[], object]]] = [
        ("create table", lambda: spark.sql(create)),
        ("insert", lambda: spark.sql("INSERT INTO probe.db.t VALUES (1, 'a'), (2, 'b')")),
        ("batch read", lambda: spark.table("probe.db.t").count()),
        ("streaming write", stream_write),
        ("streaming read", stream_read),
    ]  # fmt: skip
    failed = 0
    for name, step in steps:
        try:
            outcome = f"ok ({step()})" if name.endswith("read") else "ok"
        except Exception as exc:  # each step's JVM error is the probe's finding
            failed += 1
            java = getattr(exc, "java_exception", None)
            outcome = "FAIL " + (str(java.toString()) if java is not None else repr(exc))
        print(f"{name:16} {outcome}")
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
