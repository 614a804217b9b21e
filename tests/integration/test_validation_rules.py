"""One minimal pipeline per rule that breaks it; the shipped pipelines validate clean."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eventlake.checkpoints import write_fingerprint
from eventlake.config import Settings
from eventlake.config.loader import settings_from_dict
from eventlake.connectors import (
    DeltaOutput,
    Guarantee,
    Input,
    KafkaInput,
    KafkaOutput,
    MemoryOutput,
    Output,
    RateInput,
)
from eventlake.errors import CODES, Category, ErrorCode, EventlakeError
from eventlake.pipelines import Pipeline
from eventlake.pipelines.loader import load_pipelines
from eventlake.testing import unique_name
from eventlake.testing.hdfs import EmbeddedHdfs
from eventlake.validation import Report, check_pipeline, require_valid
from eventlake.validation.rules import RULES
from tests.integration.cli_helpers import run_cli, write_config

pytestmark = pytest.mark.integration

Transform = Callable[[Any, DataFrame], DataFrame]


def settings_for(tmp_path: Path, **extra: Any) -> Settings:
    params = extra.pop("params", {})
    return settings_from_dict(
        {
            "lake": {"root": str(tmp_path / "lake")},
            "checkpoints": {"root": str(tmp_path / "cp")},
            "pipelines": {"p": {"topic": "t", **params}},
            **extra,
        }
    )


def check(
    spark: SparkSession,
    tmp_path: Path,
    transform: Transform,
    *,
    source: Input | None = None,
    sink: Output | None = None,
    output_mode: str = "append",
    trigger: str | None = None,
    description: str = "",
    inputs: dict[str, Input] | None = None,
    guarantee: str | None = None,
    **settings: Any,
) -> Report:
    pipeline = Pipeline("p")
    pipeline.flow(
        name="f", input=source or RateInput(), output=sink or MemoryOutput(),
        output_mode=output_mode, trigger=trigger, description=description, inputs=inputs,
        guarantee=guarantee,
    )(transform)  # fmt: skip
    _plan, report = check_pipeline(pipeline, settings_for(tmp_path, **settings), spark)
    return report


def codes(report: Report) -> list[str]:
    return [f.code for f in report.findings]


def only(report: Report, code: str) -> None:
    assert codes(report) == [code], report.findings
    finding = report.findings[0]
    assert finding.flow == "p.f"
    assert finding.what
    assert finding.why
    assert finding.fix
    assert finding.severity == ("error" if code.startswith("EL-V") else "warning")


def wm(df: DataFrame) -> DataFrame:
    return df.withWatermark("timestamp", "1 minute")


def refused_before_start(spark: SparkSession, tmp_path: Path, report: Report, fix: str) -> None:
    """The run path stops on this error before any query starts, naming the fix."""
    with pytest.raises(EventlakeError) as info:
        require_valid(report)
    assert info.value.code == ErrorCode.VALIDATION_FAILED
    assert report.errors[0].code in str(info.value)
    assert fix in str(info.value)
    assert spark.streams.active == []
    assert not (tmp_path / "cp" / "p" / "f").exists()


# --- errors ---------------------------------------------------------------------------


def test_v001_append_aggregation_without_watermark(spark: SparkSession, tmp_path: Path) -> None:
    report = check(spark, tmp_path, lambda c, df: df.groupBy("value").count())
    only(report, "EL-V001")
    refused_before_start(spark, tmp_path, report, "with_watermark")


def test_v001_not_raised_for_a_windowed_aggregation(spark: SparkSession, tmp_path: Path) -> None:
    def windowed(c: Any, df: DataFrame) -> DataFrame:
        return wm(df).groupBy(F.window("timestamp", "1 minute")).count()

    assert codes(check(spark, tmp_path, windowed)) == []


def test_v002_complete_without_aggregation(spark: SparkSession, tmp_path: Path) -> None:
    report = check(spark, tmp_path, lambda c, df: df, output_mode="complete")
    only(report, "EL-V002")
    refused_before_start(spark, tmp_path, report, "append mode")


def test_v003_update_into_the_delta_sink(spark: SparkSession, tmp_path: Path) -> None:
    def agg(c: Any, df: DataFrame) -> DataFrame:
        return wm(df).groupBy(F.window("timestamp", "1 minute")).count()

    report = check(spark, tmp_path, agg, sink=DeltaOutput("gold", "t"), output_mode="update")
    only(report, "EL-V003")
    refused_before_start(spark, tmp_path, report, "MERGE")
    assert not (tmp_path / "lake" / "gold" / "t").exists()  # nothing created either


def test_v004_continuous_with_state_and_a_delta_sink(spark: SparkSession, tmp_path: Path) -> None:
    def dedup(c: Any, df: DataFrame) -> DataFrame:
        return wm(df).dropDuplicatesWithinWatermark(["value"])

    report = check(spark, tmp_path, dedup, sink=DeltaOutput("s", "t"), trigger="continuous")
    assert codes(report) == ["EL-V004", "EL-V004"]
    refused_before_start(spark, tmp_path, report, "processing-time")


def test_v010_real_time_with_state_a_rate_input_and_a_delta_sink(
    spark: SparkSession, tmp_path: Path
) -> None:
    def dedup(c: Any, df: DataFrame) -> DataFrame:
        return wm(df).dropDuplicatesWithinWatermark(["value"])

    report = check(spark, tmp_path, dedup, sink=DeltaOutput("s", "t"), trigger="real-time")
    assert codes(report) == ["EL-V010"] * 3
    whats = " ".join(f.what for f in report.findings)
    assert "DeduplicateWithinWatermark" in whats
    assert "real-time trigger with input rate:" in whats
    assert "delta:" in whats
    refused_before_start(spark, tmp_path, report, "processing-time trigger")
    # Stateless Kafka -> Kafka is what real-time mode runs: no finding.
    clean = check(
        spark, tmp_path / "ok", lambda c, df: df.select("key", "value"),
        source=KafkaInput(), sink=KafkaOutput("topic"), trigger="real-time:2 seconds",
    )  # fmt: skip
    assert codes(clean) == []


def test_v005_slide_larger_than_window(spark: SparkSession, tmp_path: Path) -> None:
    def sliding(c: Any, df: DataFrame) -> DataFrame:
        return wm(df).groupBy(F.window("timestamp", "10 minutes", "20 minutes")).count()

    only(check(spark, tmp_path, sliding), "EL-V005")


def planned_not_committed(checkpoint: Path) -> None:
    """Batch 0 of a one-source query planned and not committed, as Spark logs it."""
    offsets = checkpoint / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n0\n')


def test_v006_checkpoint_of_a_different_plan(spark: SparkSession, tmp_path: Path) -> None:
    first = Pipeline("p")
    first.flow(name="f", input=RateInput(), output=MemoryOutput())(lambda c, df: df)
    plan, report = check_pipeline(first, settings_for(tmp_path), spark)
    assert codes(report) == []
    write_fingerprint(plan.flows[0].checkpoint, plan.flows[0].fingerprint())
    # A batch was planned, none committed: no state to read, the fingerprints are compared
    # (the state itself: test_upgrade_check.py).
    planned_not_committed(plan.flows[0].checkpoint.path)

    def dedup(c: Any, df: DataFrame) -> DataFrame:
        return wm(df).dropDuplicatesWithinWatermark(["value"])

    changed = check(spark, tmp_path, dedup)
    assert codes(changed) == ["EL-V006"]
    assert "stateful" in changed.findings[0].what

    foreign = tmp_path / "other"
    planned_not_committed(foreign / "cp" / "p" / "f")
    only(check(spark, foreign, lambda c, df: df), "EL-V006")
    # Nothing planned, nothing to resume: a new checkpoint, whoever made the folder.
    (foreign / "cp" / "p" / "f" / "offsets" / "0").unlink()
    assert codes(check(spark, foreign, lambda c, df: df)) == []


def test_v008_outer_join_without_watermarks_and_range(spark: SparkSession, tmp_path: Path) -> None:
    def join(c: Any, df: DataFrame) -> DataFrame:
        other = (
            c.spark.readStream.format("rate")
            .load()
            .select(F.col("value").alias("v2"), F.col("timestamp").alias("t2"))
        )
        return wm(df).join(other, F.expr("value = v2"), "left_outer")

    report = check(spark, tmp_path, join)
    assert "EL-V008" in codes(report)
    refused_before_start(spark, tmp_path, report, "BETWEEN")

    def ranged(c: Any, df: DataFrame) -> DataFrame:
        other = (
            c.spark.readStream.format("rate")
            .load()
            .select(F.col("value").alias("v2"), F.col("timestamp").alias("t2"))
            .withWatermark("t2", "1 minute")
        )
        cond = F.expr("value = v2 AND t2 BETWEEN timestamp AND timestamp + INTERVAL 1 MINUTE")
        return wm(df).join(other, cond, "left_outer")

    assert "EL-V008" not in codes(check(spark, tmp_path / "ok", ranged))


def test_v009_partition_by_nested_or_absent_column(spark: SparkSession, tmp_path: Path) -> None:
    def windowed(c: Any, df: DataFrame) -> DataFrame:
        return wm(df).groupBy(F.window("timestamp", "1 minute")).count()

    report = check(
        spark, tmp_path, windowed, sink=DeltaOutput("g", "t", partition_by=("window.start",))
    )
    only(report, "EL-V009")
    refused_before_start(spark, tmp_path, report, "top-level column")


# --- warnings -------------------------------------------------------------------------


def test_w101_state_without_watermark(spark: SparkSession, tmp_path: Path) -> None:
    only(check(spark, tmp_path, lambda c, df: df.dropDuplicates(["value"])), "EL-W101")


def test_w101_joins(spark: SparkSession, tmp_path: Path) -> None:
    """A stream-stream join keeps both sides as state; a stream-static join keeps none."""

    def other() -> DataFrame:
        rate = spark.readStream.format("rate").load()
        return rate.select(F.col("value").alias("v2"), F.col("timestamp").alias("t2"))

    def stream_stream(c: Any, df: DataFrame) -> DataFrame:
        return wm(df).join(other(), F.col("value") == F.col("v2"))

    only(check(spark, tmp_path, stream_stream), "EL-W101")
    assert "stream-stream Join" in check(spark, tmp_path / "a", stream_stream).findings[0].what

    def both_watermarked(c: Any, df: DataFrame) -> DataFrame:
        right = other().withWatermark("t2", "10 minutes")
        within = F.expr("t2 BETWEEN timestamp AND timestamp + INTERVAL 5 MINUTES")
        return wm(df).join(right, (F.col("value") == F.col("v2")) & within)

    assert codes(check(spark, tmp_path / "b", both_watermarked)) == []

    static = spark.range(10).select(F.col("id").alias("v2"), F.lit("x").alias("label"))
    stream_static = check(
        spark, tmp_path / "c", lambda c, df: df.join(static, F.col("value") == F.col("v2"), "left")
    )
    assert codes(stream_static) == []


def test_w102_drop_duplicates_instead_of_within_watermark(
    spark: SparkSession, tmp_path: Path
) -> None:
    only(check(spark, tmp_path, lambda c, df: wm(df).dropDuplicates(["value"])), "EL-W102")
    fine = check(spark, tmp_path / "b", lambda c, df: wm(df).dropDuplicates(["value", "timestamp"]))
    assert codes(fine) == []


def test_w103_kafka_without_backpressure(spark: SparkSession, tmp_path: Path) -> None:
    report = check(
        spark, tmp_path, lambda c, df: df, source=KafkaInput(),
        params={"max_offsets_per_trigger": None},
    )  # fmt: skip
    only(report, "EL-W103")
    second_input = check(
        spark, tmp_path / "b", lambda c, df: df, inputs={"k": KafkaInput()},
        params={"max_offsets_per_trigger": None},
    )  # fmt: skip
    only(second_input, "EL-W103")


def test_w104_once_trigger(spark: SparkSession, tmp_path: Path) -> None:
    only(check(spark, tmp_path, lambda c, df: df, trigger="once"), "EL-W104")


def test_w105_output_weaker_than_the_declared_guarantee(
    spark: SparkSession, tmp_path: Path
) -> None:
    def as_kafka(c: Any, df: DataFrame) -> DataFrame:
        return df.selectExpr("CAST(value AS STRING) AS key", "CAST(value AS STRING) AS value")

    assert KafkaOutput("topic").guarantee is Guarantee.AT_LEAST_ONCE
    report = check(spark, tmp_path, as_kafka, sink=KafkaOutput("topic"), guarantee="exactly-once")
    only(report, "EL-W105")
    assert "at-least-once" in report.findings[0].what
    # The description no longer matters; the types do.
    worded = check(
        spark, tmp_path / "b", as_kafka, sink=KafkaOutput("topic"),
        description="Publishes ticks, exactly-once.",
    )  # fmt: skip
    assert codes(worded) == []
    honest = check(spark, tmp_path / "c", as_kafka, sink=KafkaOutput("topic"),
                   guarantee="at-least-once")  # fmt: skip
    assert codes(honest) == []
    delta = check(spark, tmp_path / "d", lambda c, df: df, sink=DeltaOutput("x", "ticks"),
                  guarantee="exactly-once")  # fmt: skip
    assert codes(delta) == []


def test_w106_complete_mode_over_an_id(spark: SparkSession, tmp_path: Path) -> None:
    def per_user(c: Any, df: DataFrame) -> DataFrame:
        return df.withColumn("user_id", F.col("value") % 1000).groupBy("user_id").count()

    only(check(spark, tmp_path, per_user, output_mode="complete"), "EL-W106")


def test_w107_local_storage_in_production(spark: SparkSession, tmp_path: Path) -> None:
    report = check(spark, tmp_path, lambda c, df: df, production=True)
    assert codes(report) == ["EL-W107", "EL-W107"]
    assert codes(check(spark, tmp_path / "dev", lambda c, df: df)) == []


def test_w107_not_for_a_distributed_store(
    spark: SparkSession, hdfs: EmbeddedHdfs, tmp_path: Path
) -> None:
    pipeline = Pipeline("p")
    pipeline.flow(name="f", input=RateInput(), output=MemoryOutput())(lambda c, df: df)
    remote = f"{hdfs.uri}/{unique_name('w107')}"

    def report(lake: str, checkpoints: str) -> Report:
        settings = settings_from_dict({
            "production": True, "lake": {"root": lake}, "checkpoints": {"root": checkpoints},
            "pipelines": {"p": {"topic": "t"}},
        })  # fmt: skip
        return check_pipeline(pipeline, settings, spark)[1]

    assert codes(report(f"{remote}/lake", f"{remote}/cp")) == []
    mixed = report(str(tmp_path / "lake"), f"{remote}/cp")
    assert codes(mixed) == ["EL-W107"]
    assert f"its table is on a local folder ({tmp_path / 'lake'})" in mixed.findings[0].what
    # A file: URI is a local folder too.
    assert codes(report(f"{remote}/lake", f"file://{tmp_path}/cp")) == ["EL-W107"]


def test_w108_hdfs_state_store(spark: SparkSession, tmp_path: Path) -> None:
    key = "spark.sql.streaming.stateStore.providerClass"
    before = spark.conf.get(key)
    spark.conf.set(
        key, "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    )
    try:
        report = check(spark, tmp_path, lambda c, df: wm(df).dropDuplicatesWithinWatermark())
    finally:
        spark.conf.set(key, before)
    only(report, "EL-W108")


def test_w109_fail_on_data_loss_off_needs_a_note(spark: SparkSession, tmp_path: Path) -> None:
    off = {"fail_on_data_loss": False}
    only(check(spark, tmp_path, lambda c, df: df, source=KafkaInput(), params=off), "EL-W109")
    noted = check(
        spark, tmp_path / "b", lambda c, df: df, source=KafkaInput(),
        params={**off, "data_loss_note": "replayed from the archive weekly"},
    )  # fmt: skip
    assert codes(noted) == []


def test_w110_checkpoint_resumes_with_a_new_watermark_delay(
    spark: SparkSession, tmp_path: Path
) -> None:
    def delayed(delay: str) -> Transform:
        return lambda c, df: df.withWatermark("timestamp", delay).dropDuplicatesWithinWatermark(
            ["value"]
        )

    first = Pipeline("p")
    first.flow(name="f", input=RateInput(), output=MemoryOutput())(delayed("1 minute"))
    plan, report = check_pipeline(first, settings_for(tmp_path), spark)
    assert codes(report) == []
    write_fingerprint(plan.flows[0].checkpoint, plan.flows[0].fingerprint())
    planned_not_committed(plan.flows[0].checkpoint.path)

    later = check(spark, tmp_path, delayed("5 minutes"))
    only(later, "EL-W110")
    assert (
        "watermark timestamp 1 minutes -> timestamp 5 minutes" in later.findings[0].what
    )  # Spark's text
    assert codes(check(spark, tmp_path, delayed("1 minute"))) == []


def test_every_rule_has_a_test_and_a_unique_code() -> None:
    names = {r.code for r in RULES}
    assert len(names) == len(RULES)
    # Every rule's code is in the one code table, as a validation code.
    assert all(CODES[code].category is Category.VALIDATION for code in names)
    source = Path(__file__).read_text()
    for code in names:
        assert f"test_{code.split('-')[1].lower()}_" in source, code


def test_shipped_pipelines_validate_clean(spark: SparkSession, tmp_path: Path) -> None:
    for name in load_pipelines(examples=True).names():
        pipeline = load_pipelines(examples=True).get(name)
        _plan, report = check_pipeline(
            pipeline, settings_for(tmp_path / name), spark, lake_root=tmp_path / name / "lake"
        )
        assert report.findings == [], (name, report.findings)


BROKEN_MODULE = """
from eventlake.connectors import MemoryOutput, RateInput
from eventlake.pipelines import Pipeline

broken = Pipeline("broken")
broken.flow(name="f", input=RateInput(), output=MemoryOutput(), output_mode="complete")(
    lambda ctx, df: df)

dated = Pipeline("dated")
dated.flow(name="g", input=RateInput(), output=MemoryOutput(), trigger="once")(
    lambda ctx, df: df)
"""


def test_cli_exit_codes_and_json(tmp_path: Path, bootstrap: str) -> None:
    module = tmp_path / "mod.py"
    module.write_text(BROKEN_MODULE)
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path)
    base = ("--config", str(cfg), "validate")
    err = run_cli(*base, "broken", "--module", str(module), "--format", "json")
    assert err.returncode == 1, err.stderr
    [report] = json.loads(err.stdout)
    assert [(f["code"], f["flow"]) for f in report["findings"]] == [("EL-V002", "broken.f")]

    warn = run_cli(*base, "dated", "--module", str(module))
    assert warn.returncode == 0, warn.stderr
    assert "EL-W104" in warn.stdout
    strict = run_cli(*base, "dated", "--module", str(module), "--strict")
    assert strict.returncode == 2

    # Every shipped pipeline is clean: test_shipped_pipelines_validate_clean.
    clean = run_cli(*base, "orders", "--strict", "--format", "json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert json.loads(clean.stdout) == [{"pipeline": "orders", "findings": []}]

    refused = run_cli("--config", str(cfg), "run", "broken", "--module", str(module))
    assert refused.returncode == 1
    assert "EL-VALIDATE-001" in refused.stderr
    assert "EL-V002 broken.f" in refused.stderr
    assert not (tmp_path / "checkpoints" / "broken").exists()
