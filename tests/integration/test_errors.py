"""Spark and JVM exceptions become coded errors by type and condition, on a real session."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eventlake.errors import (
    ConnectorError,
    ErrorCode,
    PipelineRuntimeError,
    describe,
    interrupted,
    jvm_causes,
    translate,
)
from eventlake.testing import free_port

pytestmark = pytest.mark.integration


def test_analysis_error_keeps_its_condition(spark: SparkSession) -> None:
    with pytest.raises(Exception, match="UNRESOLVED_COLUMN") as info:
        spark.range(1).select("nope")
    err = translate(info.value, context="flow 'p.f'")
    assert err.code == ErrorCode.SPARK_ANALYSIS
    assert isinstance(err, PipelineRuntimeError)
    assert err.spark_condition == "UNRESOLVED_COLUMN.WITH_SUGGESTION"
    assert err.what.startswith("flow 'p.f': Spark rejected the query plan")
    assert "nope" in err.what


def test_missing_data_source_is_a_missing_jar(spark: SparkSession) -> None:
    with pytest.raises(Exception, match="DATA_SOURCE_NOT_FOUND") as info:
        spark.readStream.format("eventlake_no_such_source").load()
    err = translate(info.value)
    assert err.code == ErrorCode.JARS_MISSING
    assert err.spark_condition == "DATA_SOURCE_NOT_FOUND"
    assert err.fix is not None
    assert "eventlake jars fetch" in err.fix


def test_unreachable_kafka_by_exception_class(spark: SparkSession) -> None:
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", f"127.0.0.1:{free_port()}")
        .option("subscribe", "t")
        .option("kafka.default.api.timeout.ms", "2000")
        .option("kafka.request.timeout.ms", "1000")
    )
    with pytest.raises(Exception, match="Timed out") as info:
        reader.load().count()
    err = translate(info.value)
    assert err.code == ErrorCode.KAFKA_UNREACHABLE
    assert isinstance(err, ConnectorError)
    assert "org.apache.kafka.common.errors.TimeoutException" in err.what


def test_a_jdbc_error_is_described_by_its_cause_and_carries_its_sqlstate(
    spark: SparkSession,
) -> None:
    """The one-line description is the innermost JVM exception, and a JDBC exception's
    SQLSTATE is read by type (Spark's own error states ``HV000`` here)."""
    port = free_port()
    reader = (
        spark.read.format("jdbc")
        .option("url", f"jdbc:postgresql://127.0.0.1:{port}/nowhere")
        .option("driver", "org.postgresql.Driver")
        .option("dbtable", "t")
    )
    with pytest.raises(Exception, match=r"FAILED_JDBC\.CONNECTION") as info:
        reader.load()
    assert describe(info.value) == "java.net.ConnectException: Connection refused"
    causes = jvm_causes(info.value)
    assert [c.cls for c in causes][-2:] == [
        "org.postgresql.util.PSQLException",
        "java.net.ConnectException",
    ]
    assert [c.sql_state for c in causes][-2:] == ["08001", None]  # 08001: cannot connect
    assert f"127.0.0.1:{port} refused" in causes[-2].message


def test_failed_query_names_the_python_error(spark: SparkSession, tmp_path: Path) -> None:
    def boom(value: int) -> int:
        raise ValueError(f"bad value {value}")

    query = (
        spark.readStream.format("rate").load()
        .select(F.udf(boom, "long")("value"))
        .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")).start()
    )  # fmt: skip
    with pytest.raises(Exception, match="bad value") as info:
        query.awaitTermination(120)
    err = translate(info.value, context="flow 'p.f', in its first batch")
    assert err.code == ErrorCode.QUERY_FAILED
    assert err.spark_condition == "STREAM_FAILED"
    assert "ValueError: bad value" in err.what


def test_an_interrupt_is_found_under_the_jvm_and_python_wrappers(spark: SparkSession) -> None:
    """What ``StreamingQuery.stop()`` leaves in a query it cuts short: the run's stop
    ignores it, any other failure stays a failure."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None

    def failed_future(throwable: object) -> BaseException:
        future = jvm.java.util.concurrent.CompletableFuture()
        future.completeExceptionally(throwable)
        try:
            future.get()  # ExecutionException, caused by the throwable
        except Exception as exc:
            return exc
        raise AssertionError("the future did not fail")

    stop = failed_future(jvm.java.lang.InterruptedException("sleep interrupted"))
    with pytest.raises(RuntimeError) as wrapped:
        raise RuntimeError("batch function failed") from stop
    assert interrupted(wrapped.value)
    assert interrupted(stop)
    assert "java.lang.InterruptedException" in [c.cls for c in jvm_causes(stop)]
    other = failed_future(jvm.java.lang.IllegalStateException("not an interrupt"))
    assert not interrupted(other)
    assert not interrupted(RuntimeError("plain"))
