"""Building the driver JVM's class-data archive (:mod:`eventlake.class_archive`).

A JVM of its own (a child process) runs a small pipeline of the kinds eventlake runs: Delta
in and out, expectations, a watermarked de-duplication and window in RocksDB state, a MERGE
and a Kafka source's plan. HotSpot writes every class it loaded into the archive as that
JVM exits; the archive is then moved into place at once, so a run never maps half of one.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.class_archive import archive_path, prune
from eventlake.config import Settings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.jvm_code import spark_jars

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from eventlake.pipelines import FlowContext, Pipeline

#: The child's whole run: its JVM's start, the pipeline, the archive's dump.
BUILD_TIMEOUT = 600.0


@dataclass(frozen=True)
class ArchiveBuild:
    path: Path
    #: False when the archive for these jars was there already.
    built: bool
    seconds: float
    size: int


def build_class_archive(settings: Settings, *, force: bool = False) -> ArchiveBuild | None:
    """The class-data archive for this Java, pyspark and Spark jar set, built unless it
    exists (or with ``force``); None without a Java. EL-JARS-003 when the build fails (its
    output is in ``class-archive.log`` beside the archives)."""
    jars = spark_jars(repository=settings.jars.repository)
    target = archive_path(jars)
    if target is None:
        return None
    if target.is_file() and not force:
        return ArchiveBuild(target, False, 0.0, target.stat().st_size)
    target.parent.mkdir(parents=True, exist_ok=True)
    log = target.parent / "class-archive.log"
    partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="eventlake-archive-") as scratch:
            code = "import sys; from eventlake.warmup import train; train(sys.argv[1], sys.argv[2])"
            with log.open("w") as out:
                result = subprocess.run(
                    [sys.executable, "-c", code, str(partial), scratch],
                    stdout=out, stderr=out, timeout=BUILD_TIMEOUT, check=False,
                )  # fmt: skip
        if result.returncode != 0 or not partial.is_file():
            raise EventlakeError(
                ErrorCode.CLASS_ARCHIVE_FAILED,
                f"the JVM class-data archive was not built (exit {result.returncode}).",
                expected=f"a JVM that writes {partial.name} as it exits",
                fix=f"see {log}; runs start without the archive meanwhile",
            )
        os.replace(partial, target)
    except subprocess.TimeoutExpired as exc:
        raise EventlakeError(
            ErrorCode.CLASS_ARCHIVE_FAILED,
            f"building the JVM class-data archive took over {BUILD_TIMEOUT:.0f} s.",
            fix=f"see {log}; runs start without the archive meanwhile",
        ) from exc
    finally:
        partial.unlink(missing_ok=True)
    prune(target)
    return ArchiveBuild(target, True, time.monotonic() - started, target.stat().st_size)


def train(archive: str, scratch: str) -> None:
    """The child's work: start Spark with ``-XX:ArchiveClassesAtExit``, run the pipeline
    in ``scratch``, and exit the JVM (the archive is written as it exits)."""
    from py4j.protocol import Py4JError
    from pyspark import SparkContext

    from eventlake.config.loader import settings_from_dict
    from eventlake.connectors.delta.tables import ensure_delta_table
    from eventlake.connectors.kafka import kafka_records
    from eventlake.run import run_pipeline
    from eventlake.session import get_spark

    root = Path(scratch)
    settings = settings_from_dict({
        "lake": {"root": str(root / "lake")},
        "checkpoints": {"root": str(root / "checkpoints")},
        "spark": {"class_archive": False},
        "log": {"file": str(root / "eventlake.log")},
    })  # fmt: skip
    spark = get_spark(settings, java_options=f"-XX:ArchiveClassesAtExit={archive}")
    landing = root / "lake" / "landing" / "events"
    ensure_delta_table(spark, landing, "id STRING, key STRING, ts TIMESTAMP, amount DOUBLE")
    spark.sql(
        "SELECT CAST(id AS STRING) id, CAST(id % 7 AS STRING) key, "
        "TIMESTAMP'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) ts, "
        "CAST(id AS DOUBLE) amount FROM range(2000)"
    ).write.format("delta").mode("append").save(str(landing))
    run_pipeline(_pipeline(), settings, trigger="available-now")
    from delta.tables import DeltaTable

    gold = DeltaTable.forPath(spark, str(root / "lake" / "gold" / "counts"))
    updates = spark.read.format("delta").load(str(root / "lake" / "gold" / "counts"))
    (gold.alias("t").merge(updates.alias("s"), "t.key = s.key AND t.window_start = s.window_start")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())  # fmt: skip
    kafka = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
             .option("subscribe", "warmup").load())  # fmt: skip
    kafka_records(kafka).schema  # noqa: B018 (planned, not started: no broker is asked)
    gateway = SparkContext._gateway
    assert gateway is not None
    spark.stop()
    with contextlib.suppress(Py4JError, OSError):  # the call's connection ends with the JVM
        gateway.jvm.java.lang.System.exit(0)
    gateway.proc.wait(BUILD_TIMEOUT)


def _pipeline() -> Pipeline:
    from eventlake.connectors.delta import DeltaInput, DeltaOutput
    from eventlake.pipelines import Pipeline, expect
    from eventlake.transforms.windows import flatten_window, windowed

    warmup = Pipeline("warmup", description="the class-data archive's training run")

    @warmup.flow(input=DeltaInput("landing", "events"), output=DeltaOutput("silver", "events"))
    @expect("has_id", "id IS NOT NULL", on_violation="drop")
    def events(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return ctx.with_watermark(df, "ts", "10 minutes").dropDuplicatesWithinWatermark(["id"])

    @warmup.flow(input=DeltaInput("silver", "events"), output=DeltaOutput("gold", "counts"))
    def counts(ctx: FlowContext, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        windows = windowed(ctx, df, "ts", "10 minutes", "5 minutes", "key")
        return flatten_window(windows.agg(F.count("*").alias("n"), F.sum("amount").alias("sum")))

    return warmup
