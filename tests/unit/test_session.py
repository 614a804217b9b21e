from __future__ import annotations

import os
from pathlib import Path

import pytest

from eventlake.config import SparkSettings
from eventlake.scratch import claim as claim_scratch
from eventlake.session import (
    CODEGEN_CACHE_ENTRIES,
    DRIVER_JAVA_OPTIONS,
    EXECUTOR_JAVA_OPTIONS,
    HDFS_COMPLETE_DELAY,
    HDFS_COMPLETE_RETRIES,
    IN_PROCESS_FILE_CONTEXT,
    IN_PROCESS_FILESYSTEM,
    LOCAL_FILE_CONTEXT,
    LOCAL_FILESYSTEM_CONF,
    LOCAL_LOG_STORE,
    LOCAL_LOG_STORE_CONF,
    PARQUET_VECTORED_IO,
    POLLING_DELAY,
    RAW_LOCAL_FILE_CONTEXT,
    ROCKSDB_PROVIDER,
    driver_class_path,
    effective_conf,
    local_cores,
    native_trim_option,
    scratch_conf,
    spark_conf,
    with_task_attempts,
)

JARS = [Path("/j/delta.jar"), Path("/j/kafka.jar")]


def test_local_masters_get_task_attempts_others_are_left_alone() -> None:
    assert with_task_attempts("local[*]", 4) == "local[*,4]"
    assert with_task_attempts("local[2]", 3) == "local[2,3]"
    assert with_task_attempts("local", 4) == "local[1,4]"
    assert with_task_attempts("local[2,1]", 4) == "local[2,1]"  # as the user wrote it
    assert with_task_attempts("spark://127.0.0.1:7077", 4) == "spark://127.0.0.1:7077"
    conf = spark_conf(SparkSettings(master="local[2]", task_attempts=1), JARS)
    assert conf["spark.master"] == "local[2,1]"


def test_local_defaults() -> None:
    conf = spark_conf(SparkSettings(), JARS)
    assert conf["spark.master"] == "local[*,4]"  # a failed task is tried again, as on a cluster
    assert conf["spark.jars"] == "/j/delta.jar,/j/kafka.jar"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
    assert conf["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"] == "true"
    assert conf["spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"] == "true"
    assert conf["spark.sql.shuffle.partitions"] == str(len(os.sched_getaffinity(0)))
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.databricks.delta.properties.defaults.checkpointInterval"] == "100"
    assert conf[HDFS_COMPLETE_DELAY] == "50"
    assert conf[HDFS_COMPLETE_RETRIES] == "8"
    assert conf[PARQUET_VECTORED_IO] == "false"
    assert conf[CODEGEN_CACHE_ENTRIES] == "500"
    assert conf[POLLING_DELAY] == "250ms"  # Spark's 10 ms: 100 source requests/s when idle
    assert conf["spark.databricks.delta.allFilesInCrc.thresholdNumFiles"] == "256"  # Delta: 50
    assert "spark.jars.packages" not in conf


def test_cluster_master_keeps_spark_defaults_and_user_conf_wins() -> None:
    conf = spark_conf(
        SparkSettings(
            master="spark://head:7077",
            conf={
                "spark.sql.session.timeZone": "CET",
                PARQUET_VECTORED_IO: "true",
                CODEGEN_CACHE_ENTRIES: "4000",
                POLLING_DELAY: "10ms",
                "spark.databricks.delta.allFilesInCrc.thresholdNumFiles": "50",
            },
        ),
        JARS,
    )
    assert conf["spark.master"] == "spark://head:7077"
    assert "spark.sql.shuffle.partitions" not in conf
    assert conf["spark.sql.session.timeZone"] == "CET"
    assert "spark.driver.host" not in conf
    assert conf[HDFS_COMPLETE_DELAY] == "50"  # a lake on HDFS is used with any master
    assert conf[PARQUET_VECTORED_IO] == "true"
    assert conf[CODEGEN_CACHE_ENTRIES] == "4000"
    assert conf[POLLING_DELAY] == "10ms"
    assert conf["spark.databricks.delta.allFilesInCrc.thresholdNumFiles"] == "50"


def test_the_users_java_options_keep_eventlakes_and_come_after_them() -> None:
    conf = spark_conf(SparkSettings(conf={DRIVER_JAVA_OPTIONS: "-Xss4m -Dx=1"}), JARS)
    logging, nio, theirs = conf[DRIVER_JAVA_OPTIONS].split(" ", 2)
    assert logging.startswith("-Dlog4j2.configurationFile=file:")
    assert logging.endswith("log4j2-spark.properties")
    assert nio == "-Djdk.nio.maxCachedBufferSize=262144"
    assert theirs == "-Xss4m -Dx=1"
    cluster = SparkSettings(
        master="spark://head:7077", conf={EXECUTOR_JAVA_OPTIONS: "-Djdk.nio.maxCachedBufferSize=0"}
    )
    assert spark_conf(cluster, JARS)[EXECUTOR_JAVA_OPTIONS] == (
        "-Djdk.nio.maxCachedBufferSize=262144 -Djdk.nio.maxCachedBufferSize=0"
    )  # the user's, last, wins


def test_a_cluster_on_this_machine_reaches_the_driver_on_loopback() -> None:
    for master in ("spark://127.0.0.1:7077", "spark://localhost:17077"):
        conf = spark_conf(SparkSettings(master=master), JARS)
        assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
        assert "spark.sql.shuffle.partitions" not in conf


def test_local_cores_follow_the_master() -> None:
    assert local_cores("local") == 1
    assert local_cores("local[3]") == 3
    assert local_cores("local[2,4]") == 2
    assert local_cores("local[*]") == len(os.sched_getaffinity(0))
    assert spark_conf(SparkSettings(master="local[3]"), JARS)["spark.sql.shuffle.partitions"] == "3"


def test_under_spark_submit_its_settings_win_and_the_config_conf_wins_over_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTLAKE_JARS_DIR", str(tmp_path))  # no jar cache on this host
    submitted = {
        "spark.master": "yarn",
        "spark.jars": "hdfs:///jars/delta.jar",
        "spark.sql.session.timeZone": "CET",
        "spark.executor.memory": "4g",
    }
    spark = SparkSettings(conf={"spark.executor.memory": "8g"})
    conf = effective_conf(spark, submitted)
    assert conf["spark.master"] == "yarn"  # not the config's default local[*]
    assert conf["spark.jars"] == "hdfs:///jars/delta.jar"
    assert conf["spark.sql.session.timeZone"] == "CET"
    assert conf["spark.executor.memory"] == "8g"
    # eventlake's own choices stay where spark-submit is silent; local-only ones do not apply.
    assert conf["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
    assert "spark.sql.shuffle.partitions" not in conf
    assert "spark.driver.host" not in conf


def test_local_tables_get_eventlakes_log_store_only_with_its_jar_and_no_other_choice() -> None:
    ours = [*JARS, Path("/cache/eventlake/0123/eventlake-jvm.jar")]
    assert spark_conf(SparkSettings(), ours)[LOCAL_LOG_STORE_CONF] == LOCAL_LOG_STORE
    assert LOCAL_LOG_STORE_CONF not in spark_conf(SparkSettings(), JARS)
    # Delta refuses a scheme's log store beside one for all schemes: the user's stays alone.
    for key in ("spark.delta.logStore.class", "delta.logStore.class"):
        conf = spark_conf(SparkSettings(conf={key: "com.example.Store"}), ours)
        assert LOCAL_LOG_STORE_CONF not in conf
        assert conf[key] == "com.example.Store"
    mine = SparkSettings(conf={LOCAL_LOG_STORE_CONF: "com.example.Local"})
    assert spark_conf(mine, ours)[LOCAL_LOG_STORE_CONF] == "com.example.Local"


def test_under_spark_submit_the_log_store_follows_the_jars_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTLAKE_JARS_DIR", str(tmp_path))
    given = "file:/opt/jars/delta-spark.jar,file:/opt/jars/eventlake-jvm.jar"
    conf = effective_conf(SparkSettings(), {"spark.master": "yarn", "spark.jars": given})
    assert conf[LOCAL_LOG_STORE_CONF] == LOCAL_LOG_STORE
    without = {"spark.master": "yarn", "spark.jars": "file:/opt/jars/delta-spark.jar"}
    assert LOCAL_LOG_STORE_CONF not in effective_conf(SparkSettings(), without)
    chosen = {**without, "spark.jars": given, "spark.delta.logStore.class": "com.example.S"}
    assert LOCAL_LOG_STORE_CONF not in effective_conf(SparkSettings(), chosen)
    # Without --jars eventlake's jars are given; a log store chosen with --conf still wins.
    ours = [*JARS, Path("/cache/eventlake/0123/eventlake-jvm.jar")]
    yarn = {"spark.master": "yarn"}
    assert effective_conf(SparkSettings(), yarn, ours)[LOCAL_LOG_STORE_CONF] == LOCAL_LOG_STORE
    conf = effective_conf(SparkSettings(), {**yarn, "spark.delta.logStore.class": "c.S"}, ours)
    assert LOCAL_LOG_STORE_CONF not in conf


def _own_jars(folder: Path, *, fs: bool = True) -> list[Path]:
    own = folder / "eventlake-jvm.jar"
    own.write_bytes(b"jar")
    if fs:
        (folder / "eventlake-fs.jar").write_bytes(b"jar")
    return [*JARS, own]


def test_local_files_go_through_eventlakes_filesystem_when_its_jar_is_on_the_class_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = _own_jars(tmp_path)
    conf = spark_conf(SparkSettings(), ours)
    assert conf[LOCAL_FILESYSTEM_CONF] == IN_PROCESS_FILESYSTEM
    assert conf[LOCAL_FILE_CONTEXT] == IN_PROCESS_FILE_CONTEXT
    # The driver JVM eventlake starts gets the jar on its class path, after the user's.
    monkeypatch.delenv("SPARK_DIST_CLASSPATH", raising=False)
    assert driver_class_path(ours) == str(tmp_path / "eventlake-fs.jar")
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", "/opt/hadoop/*")
    assert driver_class_path(ours) == f"/opt/hadoop/*{os.pathsep}{tmp_path / 'eventlake-fs.jar'}"
    assert driver_class_path(JARS) is None
    # Hadoop's own without the jars, on a cluster (its executors would need the jar on
    # their class path), and where the user chose a filesystem.
    (tmp_path / "no-fs").mkdir()
    for settings, jars, chosen in [
        (SparkSettings(), JARS, None),
        (SparkSettings(), _own_jars(tmp_path / "no-fs", fs=False), None),
        (SparkSettings(master="spark://10.0.0.1:7077"), ours, None),
        (SparkSettings(conf={LOCAL_FILESYSTEM_CONF: "com.example.FS"}), ours, "com.example.FS"),
    ]:
        conf = spark_conf(settings, jars)
        assert conf.get(LOCAL_FILESYSTEM_CONF) == chosen
        assert conf[LOCAL_FILE_CONTEXT] == RAW_LOCAL_FILE_CONTEXT
    # Under spark-submit its JVM runs already, with the class path it was given.
    conf = effective_conf(SparkSettings(), {"spark.master": "local[2]"}, ours)
    assert LOCAL_FILESYSTEM_CONF not in conf
    assert conf[LOCAL_FILE_CONTEXT] == RAW_LOCAL_FILE_CONTEXT
    assert conf[LOCAL_LOG_STORE_CONF] == LOCAL_LOG_STORE


def test_without_spark_submit_the_config_decides() -> None:
    spark = SparkSettings(master="local[2]")
    assert effective_conf(spark, None, JARS) == spark_conf(spark, JARS)


def test_a_log_file_that_cannot_be_written_costs_one_line_not_a_traceback_per_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging

    from eventlake.session import LogFileHandler

    handler = LogFileHandler("/dev/full")  # every write fails with ENOSPC, as on a full disk
    logger = logging.getLogger(f"eventlake.test.{id(handler)}")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for i in range(3):
            logger.warning("record %d", i)
    finally:
        logger.removeHandler(handler)
        handler.close()
    err = capsys.readouterr().err
    assert err.count("cannot write its log file /dev/full") == 1
    assert "No space left on device" in err
    assert "Traceback" not in err


def test_the_jvm_trims_its_c_heap_where_its_java_knows_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This machine's Java (17.0.15) knows the option; an older one would refuse to start.
    assert native_trim_option(60) == "-XX:TrimNativeHeapInterval=60000"
    assert native_trim_option(2.5) == "-XX:TrimNativeHeapInterval=2500"
    assert native_trim_option(0) is None
    old = tmp_path / "old-java"
    (old / "bin").mkdir(parents=True)
    java = old / "bin" / "java"  # as a JDK without it answers: unrecognized, exit 1
    java.write_text(
        "#!/bin/sh\necho 'Unrecognized VM option TrimNativeHeapInterval=60000' >&2\nexit 1\n"
    )
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(old))
    assert native_trim_option(60) is None


def test_the_scratch_folder_holds_the_jvms_temporary_and_local_spark_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    scratch = claim_scratch(tmp_path)
    tmpdir = f"-Djava.io.tmpdir={scratch.path / 'tmp'}"
    conf = spark_conf(SparkSettings(conf={DRIVER_JAVA_OPTIONS: "-Dmine=1"}), JARS)
    chosen = scratch_conf(scratch, conf, "local[2]")
    assert chosen["spark.local.dir"] == str(scratch.path / "spark")
    # Before eventlake's other options and the user's, which win a conflict.
    assert chosen[DRIVER_JAVA_OPTIONS].startswith(f"{tmpdir} -Dlog4j2")
    assert chosen[DRIVER_JAVA_OPTIONS].endswith("-Dmine=1")
    # A cluster's executors use their workers' folders: only the driver's temporary files.
    assert "spark.local.dir" not in scratch_conf(scratch, conf, "spark://127.0.0.1:7077")
    # The user's choice of local folders wins, in the config or the environment.
    assert "spark.local.dir" not in scratch_conf(scratch, {"spark.local.dir": "/d"}, "local")
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/d")
    assert "spark.local.dir" not in scratch_conf(scratch, {}, "local")
    assert scratch_conf(scratch, {}, "local")[DRIVER_JAVA_OPTIONS] == tmpdir


def test_the_collector_follows_the_run_unless_the_user_names_one() -> None:
    from eventlake.session import gc_option

    assert gc_option("auto", finite=True) == "-XX:+UseParallelGC"
    assert gc_option("auto", finite=False) is None  # the JVM's default: G1
    assert gc_option("parallel", finite=False) == "-XX:+UseParallelGC"
    assert gc_option("g1", finite=True) == "-XX:+UseG1GC"
    # Two collectors stop the JVM from starting: the user's own wins.
    assert gc_option("parallel", finite=True, java_options="-Xss4m -XX:+UseZGC") is None
    assert gc_option("auto", finite=True, java_options="-XX:+UseG1GC") is None
    assert gc_option("auto", finite=True, java_options="-XX:-UseCompressedOops") == (
        "-XX:+UseParallelGC"
    )


def test_system_gc_is_a_concurrent_cycle_on_g1_unless_the_user_decides() -> None:
    from eventlake.session import explicit_gc_option

    concurrent = "-XX:+ExplicitGCInvokesConcurrent"
    assert explicit_gc_option("") == concurrent  # the JVM's default collector: G1
    assert explicit_gc_option("-XX:+UseG1GC -Xss4m") == concurrent
    assert explicit_gc_option("-XX:+UseParallelGC") is None
    assert explicit_gc_option("-XX:+UseParallelGC -XX:+UseG1GC") == concurrent  # last wins
    assert explicit_gc_option("-XX:+UseZGC") is None
    assert explicit_gc_option("-XX:+DisableExplicitGC") is None
    assert explicit_gc_option("-XX:-ExplicitGCInvokesConcurrent") is None


def test_g1_marks_at_a_fixed_threshold_unless_the_user_decides() -> None:
    from eventlake.session import ihop_option

    fixed = "-XX:-G1UseAdaptiveIHOP"
    assert ihop_option("") == fixed  # the JVM's default collector: G1
    assert ihop_option("-XX:+UseParallelGC -XX:+UseG1GC") == fixed  # last wins
    assert ihop_option("-XX:+UseParallelGC") is None
    assert ihop_option("-XX:+UseZGC") is None
    assert ihop_option("-XX:+G1UseAdaptiveIHOP") is None
    assert ihop_option("-Xss4m -XX:InitiatingHeapOccupancyPercent=30") is None


def test_task_pages_are_a_quarter_of_g1s_region_under_a_local_master() -> None:
    from eventlake.session import DRIVER_JAVA_OPTIONS, PAGE_SIZE, task_page_size

    local = {"spark.master": "local[2]"}
    # HotSpot's region: heap / 2048 rounded down to a power of two, 1 to 32 MiB.
    assert task_page_size(local) == "256k"  # Spark's 1 GiB driver: 1 MiB regions
    assert task_page_size({**local, "spark.driver.memory": "4g"}) == "512k"
    assert task_page_size({**local, "spark.driver.memory": "16384"}) == "2048k"  # MiB
    assert task_page_size({**local, "spark.driver.memory": "4gb"}) == "512k"
    # Bytes are bytes, as Spark reads them: 2 GiB.
    assert task_page_size({**local, "spark.driver.memory": "2147483648b"}) == "256k"
    assert task_page_size({**local, "spark.driver.memory": "64g"}) == "8192k"  # 32 MiB
    # Past 32 MiB regions, 8,192 pages of 8 MiB no longer reach a task's share.
    assert task_page_size({**local, "spark.driver.memory": "200g"}) is None
    region = {DRIVER_JAVA_OPTIONS: "-Xss4m -XX:G1HeapRegionSize=8m"}
    assert task_page_size({**local, **region}) == "2048k"
    # 3.9 GiB still has 1 MiB regions: 8,192 pages of 256 KiB (2 GiB) would not reach the
    # 2.16 GiB a task may take, so Spark's own size stays.
    assert task_page_size({**local, "spark.driver.memory": "3900m"}) is None
    # The user's size, another collector, a cluster's executors: Spark's or theirs.
    assert task_page_size({**local, PAGE_SIZE: "1m"}) is None
    assert task_page_size({**local, DRIVER_JAVA_OPTIONS: "-XX:+UseParallelGC"}) is None
    assert task_page_size({**local, DRIVER_JAVA_OPTIONS: "-XX:+UseG1GC"}) == "256k"
    assert task_page_size({"spark.master": "spark://127.0.0.1:7077"}) is None
    assert task_page_size({**local, "spark.driver.memory": "lots"}) is None


def test_broadcast_pieces_are_a_quarter_of_g1s_region_under_a_local_master() -> None:
    from eventlake.session import BROADCAST_BLOCK_SIZE, DRIVER_JAVA_OPTIONS, broadcast_block_size

    local = {"spark.master": "local[2]"}
    assert broadcast_block_size(local) == "256k"  # Spark's 1 GiB driver: 1 MiB regions
    assert broadcast_block_size({**local, "spark.driver.memory": "4g"}) == "512k"
    assert broadcast_block_size({**local, "spark.driver.memory": "200g"}) == "4096k"  # Spark's
    region = {DRIVER_JAVA_OPTIONS: "-Xss4m -XX:G1HeapRegionSize=8m"}
    assert broadcast_block_size({**local, **region}) == "2048k"
    # The user's size, another collector, a cluster's executors: Spark's or theirs.
    assert broadcast_block_size({**local, BROADCAST_BLOCK_SIZE: "8m"}) is None
    assert broadcast_block_size({**local, DRIVER_JAVA_OPTIONS: "-XX:+UseParallelGC"}) is None
    assert broadcast_block_size({"spark.master": "spark://127.0.0.1:7077"}) is None
    assert broadcast_block_size({**local, "spark.driver.memory": "lots"}) is None


def test_a_run_that_ends_raises_the_jit_thresholds_unless_the_user_decides() -> None:
    from eventlake.session import jit_option

    assert jit_option(finite=True) == "-XX:CompileThresholdScaling=2"
    assert jit_option(finite=False) is None  # a run that lasts: HotSpot's thresholds
    assert jit_option(True, "-Xss4m -XX:+UseParallelGC") == "-XX:CompileThresholdScaling=2"
    for own in (
        "-XX:CompileThresholdScaling=1",
        "-XX:TieredStopAtLevel=1",
        "-XX:-TieredCompilation",
        "-Xss4m -Xint",
        "-Xcomp",
    ):
        assert jit_option(True, own) is None, own
