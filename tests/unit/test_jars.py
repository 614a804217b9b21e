"""The resolved jar sets: complete, and never a second copy of what pyspark ships."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark

from eventlake.jars import BROKER_JARS, HDFS_TEST_JARS, SPARK_JARS, jar_files

_VERSION = re.compile(r"-\d+(\.\d+)+[^-]*(-[A-Za-z0-9.]+)?\.jar$")


def _artifact(jar: Path) -> str:
    return _VERSION.sub("", jar.name)


def _pyspark_artifacts() -> set[str]:
    return {_artifact(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}


def test_spark_jars_do_not_collide_with_pyspark() -> None:
    clashes = {_artifact(j) for j in jar_files(SPARK_JARS)} & _pyspark_artifacts()
    assert clashes == set()


def test_spark_jars_hold_delta_kafka_and_jdbc() -> None:
    artifacts = {_artifact(j) for j in jar_files(SPARK_JARS)}
    assert {
        "delta-spark_4.2_2.13",
        "delta-storage",
        "spark-sql-kafka-0-10_2.13",
        "spark-token-provider-kafka-0-10_2.13",
        "kafka-clients",
        "commons-pool2",
        "postgresql",
    } <= artifacts


def test_broker_jars_hold_kafka_and_a_logging_binding() -> None:
    artifacts = {_artifact(j) for j in jar_files(BROKER_JARS)}
    assert {"kafka_2.13", "kafka-clients", "log4j-slf4j2-impl", "log4j-core"} <= artifacts
    slf4j = [j.name for j in jar_files(BROKER_JARS) if _artifact(j) == "slf4j-api"]
    assert len(slf4j) == 1
    assert slf4j[0].startswith("slf4j-api-2."), slf4j


def test_the_hdfs_minicluster_is_pyspark_s_hadoop_version() -> None:
    """The test HDFS runs on pyspark's own hadoop-client-api/-runtime: same version only."""
    jars = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    hadoop = {j.name.removeprefix("hadoop-client-api-").removesuffix(".jar") for j in jars}
    assert [j.name for j in jar_files(HDFS_TEST_JARS)] == [
        f"hadoop-client-minicluster-{v}.jar" for v in sorted(hadoop)
    ]
