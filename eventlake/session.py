"""The SparkSession factory: jars by path, Delta, RocksDB state, local defaults.

The same code runs on a cluster: ``spark.master`` and every Spark setting come from config,
and ``spark.conf`` entries are applied last, over eventlake's own choices.
"""

from __future__ import annotations

import os
import sys
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.config import Settings, SparkSettings
from eventlake.errors import ErrorCode, EventlakeError, translate
from eventlake.paths import SPARK_JARS, jar_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
LOCAL_SHUFFLE_PARTITIONS = "4"
_lock = threading.Lock()


def _log4j_config() -> str:
    return str(resources.files("eventlake.resources").joinpath("log4j2-spark.properties"))


def spark_conf(spark: SparkSettings, jars: list[Path] | None = None) -> dict[str, str]:
    """The full Spark configuration eventlake starts a session with."""
    jars = jar_files(SPARK_JARS) if jars is None else jars
    conf: dict[str, str] = {
        "spark.master": spark.master,
        "spark.app.name": spark.app_name,
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Event-time text without a zone means UTC, whatever the machine's zone is.
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_log4j_config()}",
    }
    if spark.master.startswith("local"):
        # The default of 200 makes every stateful micro-batch ~40x slower on 2 cores.
        conf["spark.sql.shuffle.partitions"] = LOCAL_SHUFFLE_PARTITIONS
        # Delta 4.4 rebuilds snapshot state (for the streaming sink's txn lookup) with a job of
        # this many tasks on every commit; the default 50 costs ~5 s a batch on 2 cores.
        conf["spark.databricks.delta.snapshotPartitions"] = "1"
        conf["spark.ui.enabled"] = "false"
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    conf.update(spark.conf)
    return conf


def _check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else None
    if java is not None and not java.exists():
        raise EventlakeError(
            ErrorCode.JAVA_MISSING,
            f"JAVA_HOME is {java_home}, but {java} does not exist.",
        )


def get_spark(settings: Settings | None = None) -> SparkSession:
    """Return the process's SparkSession, creating it from ``settings`` the first time."""
    from pyspark.sql import SparkSession

    settings = settings or Settings()
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        _check_java()
        # Python UDFs and transformWithState run in worker processes started from
        # PYSPARK_PYTHON, "python3" on PATH by default: not this environment's packages.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = SparkSession.builder
        for key, value in spark_conf(settings.spark).items():
            builder = builder.config(key, value)
        try:
            session = builder.getOrCreate()
        except Exception as exc:
            raise translate(exc, context="starting Spark") from exc
        session.sparkContext.setLogLevel(settings.spark.log_level)
        return session
