"""The SparkSession factory: jars by path, Delta, RocksDB state, local defaults.

The same code runs on a cluster: ``spark.master`` and every Spark setting come from config,
and ``spark.conf`` entries are applied last, over eventlake's own choices.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventlake.allocator import SYSTEM, archive_compatible, preload
from eventlake.class_archive import archive_options, java_binary
from eventlake.cluster.code import ship_code
from eventlake.cluster.standalone import (
    DEFAULT_UI_PORT,
    UI_PORT_CONF,
    master_host,
    master_state,
    master_ui_url,
)
from eventlake.config import Settings, SparkSettings
from eventlake.connectors.delta.maintenance import FILES_IN_CHECKSUM, FILES_LISTED
from eventlake.errors import ErrorCode, EventlakeError, translate
from eventlake.jvm_code import JAR_NAME, fs_jar, spark_jars
from eventlake.processes import scoped_env
from eventlake.scratch import Scratch
from eventlake.scratch import claim as claim_scratch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
DEFAULT_CHECKPOINT_INTERVAL_CONF = "spark.databricks.delta.properties.defaults.checkpointInterval"
#: How long a query that found no new data waits before it asks its sources again.
POLLING_DELAY = "spark.sql.streaming.pollingDelay"
#: Spark's 10 ms makes each idle query on a ``0 seconds`` trigger send a Kafka offsets
#: request, or list ``_delta_log``, 100 times a second. A processing-time interval of
#: 250 ms or more waits longer anyway; only the first batch after a quiet spell can start
#: up to 0.25 s later.
POLLING_DELAY_DEFAULT = "250ms"
#: Set by spark-submit for the Python driver it starts (the port of its JVM's gateway).
SUBMIT_GATEWAY_ENV = "PYSPARK_GATEWAY_PORT"
FS_CHECKPOINT_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
#: The HDFS client's wait before it asks the NameNode again to complete a file it closed
#: (Hadoop's default 400 ms, doubling, 5 times: ~12.4 s in all), and how many times it asks.
HDFS_COMPLETE_DELAY = "spark.hadoop.dfs.client.block.write.locateFollowingBlock.initial.delay.ms"
HDFS_COMPLETE_RETRIES = "spark.hadoop.dfs.client.block.write.locateFollowingBlock.retries"
_lock = threading.Lock()
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
EXECUTOR_JAVA_OPTIONS = "spark.executor.extraJavaOptions"
#: NIO copies a read into a heap buffer through a temporary direct buffer of the read's
#: size, and keeps it for the thread's next read: a long run's threads kept the largest
#: reads they ever made (400 MiB after 12 compactions in a measurement). Reads above this
#: size use a buffer freed at once.
NIO_BUFFER_CACHE_OPTION = "-Djdk.nio.maxCachedBufferSize=262144"
PARQUET_VECTORED_IO = "spark.hadoop.parquet.hadoop.vectored.io.enabled"
#: How many compiled classes of generated code a JVM keeps, keyed by their source.
CODEGEN_CACHE_ENTRIES = "spark.sql.codegen.cache.maxEntries"
#: Spark keeps 100. Every micro-batch of every flow plans again and asks for the same
#: generated code; the orders pipeline's seven flows need several hundred classes, so with
#: 100 each batch compiled most of its code anew (25 Janino compiles a second after five
#: minutes, 3 with 2,000 entries) and loaded, JIT-compiled and unloaded the classes (35 a
#: second). What a running pipeline compiles after that is mostly used once: each
#: stateful operator's eviction predicate carries that batch's watermark as a literal
#: (about 2 classes a second in the soak's medallion). 500 entries hold every flow's reused
#: code and drop those within 4 minutes, so their classes unload; 2,000 kept them for 15,
#: with 2,300 more classes live and 20 MiB more metaspace after 30 minutes, for 5% fewer
#: compiles and the same batch times (bench/results/soak-log.md, X).
CODEGEN_CACHE_DEFAULT = "500"
#: glibc's malloc keeps what native code frees (RocksDB's blocks and memtables, the
#: compression codecs' buffers, the JIT's arenas) for reuse, and gives little of it back:
#: in the soak it held 18-63 MB of the JVM's freed memory at any time. HotSpot
#: (17.0.9+, 21.0.1+, 22+, on Linux) trims it every interval on a thread of its own.
NATIVE_TRIM_OPTION = "-XX:TrimNativeHeapInterval="
#: The ``file:`` filesystem of Hadoop's FileContext API, through which Delta writes its
#: commits: the raw one writes no hidden ``.<file>.crc`` beside each file.
LOCAL_FILE_CONTEXT = "spark.hadoop.fs.AbstractFileSystem.file.impl"
RAW_LOCAL_FILE_CONTEXT = "org.apache.hadoop.fs.local.RawLocalFs"
#: The ``file:`` filesystem of Hadoop's FileSystem API, and eventlake's (in eventlake's
#: jar), which creates files and renames them without forking ``chmod`` or ``readlink``
#: (``InProcessLocalFileSystem.java``); its ``$Fs`` is the same for FileContext, raw.
LOCAL_FILESYSTEM_CONF = "spark.hadoop.fs.file.impl"
IN_PROCESS_FILESYSTEM = "eventlake.fs.InProcessLocalFileSystem"
IN_PROCESS_FILE_CONTEXT = f"{IN_PROCESS_FILESYSTEM}$Fs"
#: Spark's launcher appends this to the JVM's class path.
DIST_CLASS_PATH = "SPARK_DIST_CLASSPATH"
#: Delta's log store for ``file:`` tables, and eventlake's (in eventlake's jar), which lists
#: ``_delta_log`` by name before it looks files up (``ListByNameLogStore.java``).
LOCAL_LOG_STORE_CONF = "spark.delta.logStore.file.impl"
LOCAL_LOG_STORE = "eventlake.delta.ListByNameLogStore"
#: One log store for every scheme; Delta refuses it beside a scheme's own.
LOG_STORE_CLASS_CONFS = ("spark.delta.logStore.class", "delta.logStore.class")
#: Marks a signal handler that stops a run between batches (``eventlake.cli.signals``).
STOP_HANDLER = "__eventlake_stops_between_batches__"
logger = logging.getLogger(__name__)


def _log4j_config() -> str:
    return str(resources.files("eventlake.resources").joinpath("log4j2-spark.properties"))


def spark_conf(
    spark: SparkSettings, jars: list[Path] | None = None, *, launching: bool = True
) -> dict[str, str]:
    """The full Spark configuration eventlake starts a session with (``launching``: in a
    driver JVM it starts itself, see :func:`own_jar_conf`)."""
    jars = spark_jars() if jars is None else jars
    conf: dict[str, str] = {
        "spark.master": with_task_attempts(spark.master, spark.task_attempts),
        "spark.app.name": spark.app_name,
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Every state partition of every stateful flow is a RocksDB instance of its own;
        # unbounded, their memtables and caches grow the JVM's resident memory for hours.
        # One budget (maxMemoryUsageMB, 500 by default) for all of them on a node.
        "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage": "true",
        # Event-time text without a zone means UTC, whatever the machine's zone is.
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        DRIVER_JAVA_OPTIONS: f"-Dlog4j2.configurationFile=file:{_log4j_config()} "
        f"{NIO_BUFFER_CACHE_OPTION}",
        EXECUTOR_JAVA_OPTIONS: NIO_BUFFER_CACHE_OPTION,
        # Parquet 1.16+ reads column chunks with Hadoop's vectored IO; on the local file
        # system each chunk goes through one of those NIO buffers (and, with checksums,
        # buffers Hadoop does not release: HADOOP-19901).
        PARQUET_VECTORED_IO: "false",
        CODEGEN_CACHE_ENTRIES: CODEGEN_CACHE_DEFAULT,
        POLLING_DELAY: POLLING_DELAY_DEFAULT,
    }
    # A Delta checkpoint written inside a commit (every 10 by default) stalls that commit for
    # 1-5 s. Sink tables leave theirs to eventlake's LogCheckpoints, off the batch's path;
    # other new tables checkpoint every 100 commits.
    conf[DEFAULT_CHECKPOINT_INTERVAL_CONF] = "100"
    # Every commit lists the table's files in its checksum while it has at most this many,
    # so a commit that raced a compaction leaves no writer a snapshot state to rebuild.
    conf[FILES_IN_CHECKSUM] = str(FILES_LISTED)
    # Spark lists _delta_log at every Delta operation; on a local or HDFS table each file
    # kept there is listed (bench/delta_log.py). A commit leaves three files there instead
    # of four: no hidden Hadoop checksum of the commit (Delta writes its own checksum
    # through the FileSystem API, which keeps one). Without Delta's checksum the SIGKILL
    # tests ran 20-35% longer: it stays.
    conf[LOCAL_FILE_CONTEXT] = RAW_LOCAL_FILE_CONTEXT
    # And a local listing looks up only the files it returns, not every file kept; under a
    # local master, local files are created and renamed without a process each.
    conf.update(own_jar_conf(jars, spark.conf, spark.master, launching=launching))
    # A file closed on HDFS is complete once the DataNodes' report of its last block reaches
    # the NameNode; asked before that, the NameNode says "not yet" and the client waits
    # 400 ms: every checkpoint and log file of a batch took ~0.4 s to write. Ask again
    # after 50 ms, doubling, 8 times: the same ~12.75 s before the close fails.
    conf[HDFS_COMPLETE_DELAY] = "50"
    conf[HDFS_COMPLETE_RETRIES] = "8"
    if _on_loopback(spark.master):
        # A cluster on this machine (``eventlake cluster start``) reaches the driver there.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if spark.master.startswith("local"):
        # Spark's 200 makes every stateful micro-batch ~40x slower on 2 cores: one shuffle
        # (and state) partition per core. A stateful checkpoint keeps the count it began with.
        conf[SHUFFLE_PARTITIONS] = str(local_cores(spark.master))
        # Delta 4.4 rebuilds snapshot state (for the streaming sink's txn lookup) with a job of
        # this many tasks on every commit; the default 50 costs ~5 s a batch on 2 cores.
        conf[SNAPSHOT_PARTITIONS] = "1"
        # Hadoop's FileContext renames a local file through a forked `readlink` (~0.1 s each;
        # 2 per batch, more with state). The FileSystem API renames in-process; rename(2)
        # is atomic, and Spark runs one query per checkpoint at a time.
        conf["spark.sql.streaming.checkpointFileManagerClass"] = FS_CHECKPOINT_MANAGER
        conf["spark.ui.enabled"] = "false"
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    for key, value in spark.conf.items():
        if key in (DRIVER_JAVA_OPTIONS, EXECUTOR_JAVA_OPTIONS):
            # The user's options come after eventlake's and win a conflict.
            conf[key] = f"{conf[key]} {value}"
        else:
            conf[key] = value
    return conf


def own_jar_conf(
    jars: list[Path] | list[str], user: dict[str, str], master: str, *, launching: bool = True
) -> dict[str, str]:
    """The settings that use eventlake's jar, when it is among ``jars``:

    - its log store for local tables, unless the user has chosen one: Hadoop's local
      listing looks up every file of ``_delta_log`` at every Delta operation; it lists
      names and looks up the newest only;
    - when eventlake starts the driver JVM (``launching``, with :func:`driver_class_path`)
      under a local master, unless the user has chosen a ``file:`` filesystem, its local
      filesystem: without Hadoop's native library, which pyspark does not ship, Hadoop
      forks ``chmod`` for each file it creates and ``readlink`` twice for each rename
      through FileContext (about 28 processes a second for the orders pipeline, on the
      batches' threads). A cluster's executors would need it on their own class path.
    """
    own = _own_jar(jars)
    if own is None:
        return {}
    conf = {}
    if not any(key in user for key in (LOCAL_LOG_STORE_CONF, *LOG_STORE_CLASS_CONFS)):
        conf[LOCAL_LOG_STORE_CONF] = LOCAL_LOG_STORE
    if (
        launching
        and master.startswith("local")
        and LOCAL_FILESYSTEM_CONF not in user
        and fs_jar(own).is_file()
    ):
        conf[LOCAL_FILESYSTEM_CONF] = IN_PROCESS_FILESYSTEM
        conf[LOCAL_FILE_CONTEXT] = IN_PROCESS_FILE_CONTEXT
    return conf


def _own_jar(jars: list[Path] | list[str]) -> Path | None:
    return next((Path(str(j)) for j in jars if Path(str(j)).name == JAR_NAME), None)


def driver_class_path(jars: list[Path] | list[str]) -> str | None:
    """What eventlake adds to the class path of a driver JVM it starts (Spark's launcher
    appends ``SPARK_DIST_CLASSPATH``): the jar of ``eventlake.fs`` beside eventlake's jar,
    when that is among ``jars``. Spark opens the ``file:`` filesystem before it loads the
    jars it is given. Every master gets it, so the class-data archive fits each."""
    own = _own_jar(jars)
    if own is None or not fs_jar(own).is_file():
        return None
    before = os.environ.get(DIST_CLASS_PATH)
    return os.pathsep.join(p for p in (before, str(fs_jar(own))) if p)


def scratch_conf(scratch: Scratch, conf: dict[str, str], master: str) -> dict[str, str]:
    """The settings that put the driver JVM's temporary files, and under a local master
    Spark's local files, in ``scratch``: not where ``spark.local.dir`` or
    ``SPARK_LOCAL_DIRS`` already says, and a ``java.io.tmpdir`` among the driver's options
    wins (it comes later)."""
    tmpdir = f"-Djava.io.tmpdir={scratch.java_tmp}"
    out = {DRIVER_JAVA_OPTIONS: f"{tmpdir} {conf.get(DRIVER_JAVA_OPTIONS, '')}".strip()}
    chosen = "spark.local.dir" in conf or os.environ.get("SPARK_LOCAL_DIRS")
    if master.startswith("local") and not chosen:
        out["spark.local.dir"] = str(scratch.spark_dir)
    return out


#: A ``-XX:+Use<name>GC`` option: the JVM refuses to start with two.
_GC_OPTION = re.compile(r"-XX:\+Use\w*GC\b")


def gc_option(choice: str, finite: bool, java_options: str = "") -> str | None:
    """The driver JVM's collector option for ``spark.gc`` (``choice``) in a run whose flows
    all end (``finite``) or not; None when ``java_options`` names one already or the
    choice is the JVM's own default.

    Parallel spends no CPU on concurrent marking or on a barrier at each reference
    written: more throughput for a run that ends. G1 keeps pauses short while old objects
    are collected, which a query that runs for months needs."""
    if _GC_OPTION.search(java_options):
        return None
    if choice == "parallel" or (choice == "auto" and finite):
        return "-XX:+UseParallelGC"
    return "-XX:+UseG1GC" if choice == "g1" else None


def _on_g1(java_options: str) -> bool:
    """Whether a JVM started with ``java_options`` collects with G1: the last collector
    they name, or none (the JVM's default)."""
    collectors = _GC_OPTION.findall(java_options)
    return not collectors or collectors[-1] == "-XX:+UseG1GC"


#: Options that decide when or whether HotSpot's JIT compilers compile.
_JIT = re.compile(
    r"-XX:(?:CompileThresholdScaling=|TieredStopAtLevel=|[+-]TieredCompilation\b)|-X(?:int|comp)\b"
)
#: The JIT's thresholds in a run that ends, as a multiple of HotSpot's.
FINITE_COMPILE_SCALING = 2


def jit_option(finite: bool, java_options: str = "") -> str | None:
    """The driver JVM's option that makes the JIT compile a method after twice HotSpot's
    invocation and loop counts, in a run whose flows all end (``finite``); None in a run
    that lasts or when ``java_options`` decide already.

    On 2 cores HotSpot's two compiler threads took about 11.7 CPU-seconds of the golden
    query's 16 (8.6 of them C2), beside 7.5 for the tasks: compiling methods that would not
    run long enough to pay for it. At twice the thresholds they took 9.3 (C2 6.9) and the
    query was faster in 8 of 10 alternating pairs (bench/results/jit-ab-2026-12-06.json).
    A run that lasts compiles once and keeps HotSpot's thresholds."""
    if not finite or _JIT.search(java_options):
        return None
    return f"-XX:CompileThresholdScaling={FINITE_COMPILE_SCALING}"


#: An option that decides what ``System.gc()`` does.
_EXPLICIT_GC = re.compile(r"-XX:[+-](?:DisableExplicitGC|ExplicitGCInvokesConcurrent)\b")


def explicit_gc_option(java_options: str) -> str | None:
    """The driver JVM's option that makes ``System.gc()`` a concurrent cycle under G1, or
    None under another collector or when ``java_options`` decide already.

    Spark's ContextCleaner calls ``System.gc()`` every ``spark.cleaner.periodicGC.interval``
    (30 minutes) so that weak references to dropped RDDs, shuffles and broadcasts are
    cleared; on G1 that is a full, stop-the-world collection (0.57 s in the soak, every
    flow waiting; bench/results/soak-log.md, AG). A concurrent cycle clears them too."""
    if not _on_g1(java_options) or _EXPLICIT_GC.search(java_options):
        return None
    return "-XX:+ExplicitGCInvokesConcurrent"


#: An option that decides when G1 starts marking the old generation.
_IHOP = re.compile(r"-XX:(?:[+-]G1UseAdaptiveIHOP\b|InitiatingHeapOccupancyPercent=)")


def ihop_option(java_options: str) -> str | None:
    """The driver JVM's option that makes G1 mark the old generation once it fills 45% of
    the heap (``InitiatingHeapOccupancyPercent``), not at G1's adaptive threshold; None
    under another collector or when ``java_options`` decide already.

    G1's adaptive threshold keeps room for the young generation, up to 60% of the heap: on
    the 1 GiB driver it fell to 13-30%, under the ~300 MiB that stays old, so G1 marked
    the heap back to back (a concurrent cycle every 2-3 s). A fixed 45% took the JVM's CPU
    from 0.90 to 0.72 cores, its pauses from 26 to 14 s in 9 minutes and a seventh off the
    batches (bench/results/soak-log.md, AI)."""
    if not _on_g1(java_options) or _IHOP.search(java_options):
        return None
    return "-XX:-G1UseAdaptiveIHOP"


#: Spark's size of a task's memory page (its default: the execution pool / cores / 16, up to
#: 64 MiB).
PAGE_SIZE = "spark.buffer.pageSize"
#: Spark's size of a broadcast's pieces (its default: 4 MiB).
BROADCAST_BLOCK_SIZE = "spark.broadcast.blockSize"
#: A task can hold this many pages at a time (``TaskMemoryManager.PAGE_TABLE_SIZE``).
_TASK_PAGES = 8192
_RESERVED_MIB = 300
_MEMORY_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?b?)\s*$", re.IGNORECASE)
_REGION_OPTION = re.compile(r"-XX:G1HeapRegionSize=(\d+[kmgt]?)\b", re.IGNORECASE)


def _mib(text: str, unit: str = "m") -> float:
    """A JVM or Spark memory size in MiB (``unit`` when it names none)."""
    match = _MEMORY_SIZE.match(text)
    if match is None:
        raise ValueError(f"not a memory size: {text!r}")
    suffix = match.group(2).lower()
    power = "bkmgt".index(suffix[0] if suffix else unit) - 2
    return int(match.group(1)) * 1024.0**power


def _local_g1_region_mib(conf: dict[str, str]) -> tuple[float, float] | None:
    """(heap, G1 region) in MiB of a driver whose tasks run in its own heap (a local master)
    under G1, or None (another master or collector, or a size eventlake cannot read)."""
    options = conf.get(DRIVER_JAVA_OPTIONS, "")
    if not conf.get("spark.master", "").startswith("local") or not _on_g1(options):
        return None
    try:
        heap = _mib(conf.get("spark.driver.memory", "1g"))
    except ValueError:
        return None
    region_option = _REGION_OPTION.findall(options)
    if region_option:
        return heap, _mib(region_option[-1], unit="b")
    # HotSpot's choice: heap / 2048 rounded down to a power of two, 1 to 32 MiB.
    return heap, min(32.0, max(1.0, 2.0 ** math.floor(math.log2(heap / 2048))))


def task_page_size(conf: dict[str, str]) -> str | None:
    """``spark.buffer.pageSize`` for a driver whose tasks run in its own heap (a local
    master) under G1, or None: a quarter of G1's region, so that a page is never a humongous
    object (half a region or more), which G1 puts straight in the old generation and which
    starts a concurrent mark whenever the old generation is past its threshold. None when
    ``conf`` sets the size, names another collector, or when a task could not reach its
    share of execution memory in 8,192 pages of that size.

    With Spark's 16 MiB pages on the 1 GiB driver heap, G1 marked the heap every 2.6 s in
    the soak; 256 KiB pages took a fifth off its CPU and 2.5% off the batches
    (bench/results/soak-log.md, AF)."""
    sizes = None if PAGE_SIZE in conf else _local_g1_region_mib(conf)
    if sizes is None:
        return None
    heap, region = sizes
    try:
        fraction = float(conf.get("spark.memory.fraction", "0.6"))
    except ValueError:
        return None
    page = region / 4
    if _TASK_PAGES * page < fraction * (heap - _RESERVED_MIB):
        return None
    return f"{round(page * 1024)}k"


def broadcast_block_size(conf: dict[str, str]) -> str | None:
    """``spark.broadcast.blockSize`` for a driver whose tasks run in its own heap (a local
    master) under G1, or None: a quarter of G1's region, at most Spark's 4 MiB; None when
    ``conf`` sets it or names another collector.

    Spark serializes every broadcast (each stage's tasks, a file scan's Hadoop
    configuration: several a micro-batch) into a buffer of a whole piece, 4 MiB, then copies
    it to its size. On the 1 GiB driver's 1 MiB regions that buffer is humongous, and each
    one while the old generation is past G1's threshold asks for a collection to start a
    concurrent mark. With 256 KiB pieces, G1 started those half as often in the soak, and
    the nine flows' batch medians summed 3-10% lower (bench/results/soak-log.md, BA)."""
    sizes = None if BROADCAST_BLOCK_SIZE in conf else _local_g1_region_mib(conf)
    if sizes is None:
        return None
    return f"{round(min(sizes[1] / 4, 4.0) * 1024)}k"


def native_trim_option(seconds: float) -> str | None:
    """The driver JVM's option to trim its C heap every ``seconds``; None when 0, off
    Linux, or when its Java does not know the option (asked: ``java OPTION -version``,
    about 30 ms), since an unknown ``-XX`` option stops a JVM from starting."""
    if seconds <= 0 or not sys.platform.startswith("linux"):
        return None
    java = java_binary()
    if java is None:
        return None
    option = f"{NATIVE_TRIM_OPTION}{round(seconds * 1000)}"
    try:
        known = subprocess.run([str(java), option, "-version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        logger.info("not trimming the JVM's C heap: %s %s failed: %s", java, option, e)
        return None
    if known.returncode != 0:
        logger.info("not trimming the JVM's C heap: %s does not know %s", java, option)
        return None
    return option


def _on_loopback(master: str) -> bool:
    return master_host(master) in ("127.0.0.1", "localhost")


def cluster_cores(session: SparkSession, master: str, timeout: float = 30.0) -> int:
    """The cores this application gets on its cluster: a standalone master's alive
    workers' cores (its web UI's ``/json/``; ``spark.master.ui.port``, 8080 by default),
    capped by ``spark.cores.max``; on other cluster managers, the cores of the executors
    registered once the first one has (waiting up to ``timeout``)."""
    conf = session.sparkContext.getConf()
    ui = master_ui_url(master, int(conf.get(UI_PORT_CONF, str(DEFAULT_UI_PORT)) or 0))
    state = master_state(ui) if ui else None
    if state is not None and int(state.get("cores", 0)) > 0:
        cores = int(state["cores"])
        cap = conf.get("spark.cores.max")
        return min(cores, int(cap)) if cap else cores
    sc = session.sparkContext
    deadline = time.monotonic() + timeout
    while not sc._jsc.sc().getExecutorIds().size() and time.monotonic() < deadline:
        time.sleep(0.2)
    return max(1, sc.defaultParallelism)


def with_task_attempts(master: str, attempts: int) -> str:
    """``master`` allowing a failed task ``attempts`` tries, for ``local`` and ``local[N]``
    (Spark's local mode gives a task one try, where a cluster gives it
    ``spark.task.maxFailures``, 4): a transient task failure then costs the task, not a
    restart of the flow's query. Other masters, and ``local[N,F]``, are left as written."""
    if master == "local":
        return f"local[1,{attempts}]"
    if master.startswith("local[") and "," not in master:
        return f"{master[:-1]},{attempts}]"
    return master


def local_cores(master: str) -> int:
    """The cores a ``local``, ``local[N]``, ``local[*]`` or ``local[N,F]`` master runs on."""
    threads = master.partition("[")[2].rstrip("]").split(",")[0] if "[" in master else "1"
    if threads == "*":
        return (
            len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1
        )
    return max(1, int(threads))


def _check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else None
    if java is not None and not java.exists():
        raise EventlakeError(
            ErrorCode.JAVA_MISSING,
            f"JAVA_HOME is {java_home}, but {java} does not exist.",
        )


def _start_jvm(
    conf: dict[str, str],
    log: Path,
    keep_fds: tuple[int, ...] = (),
    ld_preload: str | None = None,
    class_path: str | None = None,
) -> None:
    """Start Spark's JVM with its stdout and stderr in ``log`` (``ld_preload`` as its
    ``LD_PRELOAD``, ``class_path`` as its ``SPARK_DIST_CLASSPATH``), and its SparkContext.

    Everything the JVM prints goes there: Spark's log4j output and the output of the Python
    workers it starts (transformWithState's driver worker prints a line per call).
    Errors reach users translated, at the boundary; the log keeps the detail.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._active_spark_context is not None:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
    gateway = SparkContext._gateway  # spark-submit's JVM, when it started this process
    if gateway is None:
        with (
            log.open("ab") as out,  # the JVM keeps its descriptor
            scoped_env("LD_PRELOAD", ld_preload),
            scoped_env(DIST_CLASS_PATH, class_path),
        ):
            gateway = launch_gateway(  # type: ignore[no-untyped-call]
                spark_conf, popen_kwargs={"stdout": out, "stderr": out, "pass_fds": keep_fds}
            )
        ignore_stop_signals(gateway.jvm)
    # SparkContext installs a SIGINT handler of its own (cancel every job, then raise
    # KeyboardInterrupt); a stop handler installed before Spark started (`eventlake run`'s)
    # stays, so Ctrl-C stops the run between batches as SIGTERM does.
    previous = signal.getsignal(signal.SIGINT)
    SparkContext(conf=spark_conf, gateway=gateway)
    if (
        getattr(previous, STOP_HANDLER, False)
        and threading.current_thread() is threading.main_thread()
    ):
        signal.signal(signal.SIGINT, previous)
    configure_python_logging(log)


#: What pyspark imports on its first call into a new JVM (its py4j converters ask
#: ``pyspark.testing.utils`` whether numpy is there, which imports pandas: 0.4 s), imported
#: while the JVM starts instead of after.
PRELOADED_MODULES = ("pyspark.testing.utils",)


def _preload(modules: tuple[str, ...]) -> threading.Thread:
    """Import ``modules`` on a thread of their own (an import that fails is left to the
    caller that needs the module, who sees its error)."""
    import importlib

    def load() -> None:
        for name in modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    thread = threading.Thread(target=load, name="eventlake-preload", daemon=True)
    thread.start()
    return thread


def ignore_stop_signals(jvm: Any) -> None:
    """Let the driver's JVM ignore SIGTERM and SIGINT.

    A service manager stops a process group (systemd's ``KillMode=control-group``, a
    terminal's Ctrl-C, ``timeout``): the JVM, in the same group, would take the signal too
    and die while the Python side is still stopping the queries between batches. So only
    the Python side handles them; it stops the queries, then the JVM, which also exits
    when its Python parent does (it ends on its stdin's end of file).
    """
    handler = jvm.sun.misc.SignalHandler.SIG_IGN
    for name in ("TERM", "INT"):
        try:
            jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal(name), handler)
        except Exception as e:  # a JVM that reserves the signal keeps its own handling
            logger.warning("the JVM keeps its SIG%s handling: %s", name, e)


def submitted_conf() -> dict[str, str] | None:
    """What spark-submit set (its ``--master``, ``--jars``, ``--conf``...) when it started
    this process, read from its JVM; None otherwise."""
    if SUBMIT_GATEWAY_ENV not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    return dict(SparkConf().getAll())


def effective_conf(
    spark: SparkSettings, submitted: dict[str, str] | None, jars: list[Path] | None = None
) -> dict[str, str]:
    """The session's configuration: :func:`spark_conf`, or under spark-submit its settings
    over eventlake's choices (its master decides them) and the config's ``spark.conf`` over
    both. Jars passed with ``--jars`` replace eventlake's jar cache."""
    if submitted is None:
        return spark_conf(spark, jars)
    if "spark.master" in submitted:
        spark = spark.model_copy(update={"master": submitted["spark.master"]})
    # spark-submit's JVM runs already, with its own class path.
    ours = spark_conf(spark, [] if submitted.get("spark.jars") else jars, launching=False)
    # The log store depends on spark-submit's jars and settings too: decided over all.
    ours.pop(LOCAL_LOG_STORE_CONF, None)
    given = [j for j in (submitted.get("spark.jars") or ours["spark.jars"]).split(",") if j]
    chosen = own_jar_conf(given, {**submitted, **spark.conf}, spark.master, launching=False)
    return {**ours, **chosen, **submitted, **spark.conf}


class LogFileHandler(logging.FileHandler):
    """eventlake's log file. A record it cannot write (its disk full, say) costs that
    record and one line on stderr, not a traceback per record; it says so again after a
    write succeeded."""

    eventlake = True
    _failing = False  # since the last record written
    _failed = False  # the record being written

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)
        if not self._failed:
            self._failing = False

    def close(self) -> None:
        with contextlib.suppress(OSError):  # still full: what was buffered is lost
            super().close()

    def handleError(self, record: logging.LogRecord) -> None:
        self._failed = True
        if self._failing:
            return
        self._failing = True
        problem = sys.exc_info()[1]
        sys.stderr.write(f"eventlake: cannot write its log file {self.baseFilename} "
                         f"({problem}); log lines are dropped until it can\n")  # fmt: skip


def configure_python_logging(log: Path) -> None:
    """eventlake's and libraries' Python logging (warnings and up; eventlake's info too)
    into ``log``, once per process; so are Python warnings (pyspark's, with their Java
    stack traces), which would otherwise print on the console."""
    root = logging.getLogger()
    if any(getattr(h, "eventlake", False) for h in root.handlers):
        return
    handler = LogFileHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    logging.captureWarnings(True)
    root.setLevel(min(root.level or logging.WARNING, logging.WARNING))
    logging.getLogger("eventlake").setLevel(logging.INFO)


def driver_allocators(settings: Settings) -> None:
    """The driver's Python process allocating for a long run, from here on: the threads it
    starts share ``spark.driver_arenas`` glibc arenas, blocks from
    ``spark.driver_mmap_threshold`` bytes up are mapped on their own, and delta-rs
    allocates lean (:func:`~eventlake.connectors.delta.tables.lean_delta_rs_allocator`).
    Called before the process starts threads of its own (a run's first step) and by
    :func:`get_spark`."""
    from eventlake.allocator import fix_mmap_threshold, limit_arenas
    from eventlake.connectors.delta.tables import lean_delta_rs_allocator

    limit_arenas(settings.spark.driver_arenas)
    fix_mmap_threshold(settings.spark.driver_mmap_threshold)
    lean_delta_rs_allocator()


class SparkStart:
    """The process's SparkSession being started on a thread of its own: the JVM starts
    while the caller does other work (a run's pre-flight); :meth:`result` waits for it.
    An existing session is simply returned."""

    def __init__(self, settings: Settings, *, finite: bool = False) -> None:
        from pyspark import SparkContext

        self._settings = settings
        self._finite = finite
        self._spark: SparkSession | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if SparkContext._active_spark_context is not None:
            return  # a session exists: result() asks for it on the caller's thread
        self._thread = threading.Thread(target=self._start, name="eventlake-spark-start",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _start(self) -> None:
        try:
            self._spark = get_spark(self._settings, finite=self._finite)
        except BaseException as exc:  # raised again on the caller's thread
            self._error = exc

    def result(self) -> SparkSession:
        """The session, active on the calling thread (Spark keeps the active session per
        thread); the start's own error if it failed."""
        if self._thread is None:
            return get_spark(self._settings)
        self._thread.join()
        if self._error is not None:
            raise self._error
        spark = self._spark
        assert spark is not None
        assert spark._jvm is not None
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        return spark


def get_spark(
    settings: Settings | None = None, *, java_options: str | None = None, finite: bool = False
) -> SparkSession:
    """Return the process's SparkSession, creating it from ``settings`` the first time.

    The driver JVM maps the class-data archive of its Java, pyspark and jars when there is
    one (:mod:`eventlake.class_archive`; ``spark.class_archive: false`` turns it off);
    ``java_options`` replaces that choice. It trims its C heap every
    ``spark.native_trim_seconds`` where its Java can, and collects garbage with
    ``spark.gc``'s collector (:func:`gc_option`; ``finite``: the session is for a run whose
    flows all end), on G1 with ``System.gc()`` a concurrent cycle
    (:func:`explicit_gc_option`) and a fixed marking threshold (:func:`ihop_option`), and in
    a run that ends compiles with raised JIT thresholds (:func:`jit_option`). These
    come before ``spark.conf``'s own ``spark.driver.extraJavaOptions``, which win on a
    conflict. It allocates native memory with ``spark.allocator``
    (:mod:`eventlake.allocator`), and the Python process's own allocators are set
    (:func:`driver_allocators`)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    settings = settings or Settings()
    driver_allocators(settings)
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        _check_java()
        try:
            submitted = submitted_conf()
            jars = None
            if not (submitted or {}).get("spark.jars"):
                jars = spark_jars(repository=settings.jars.repository)
            conf = effective_conf(settings.spark, submitted, jars)
            allocator = settings.spark.allocator
            ld_preload = class_path = None
            if submitted is None:
                ld_preload = preload(allocator, os.environ)
                class_path = driver_class_path(jars or [])
                if (
                    java_options is None
                    and settings.spark.class_archive
                    and jars
                    and archive_compatible(allocator, conf.get(DRIVER_JAVA_OPTIONS, ""))
                ):
                    java_options = archive_options(jars)
                trim = native_trim_option(settings.spark.native_trim_seconds)
                user_options = conf.get(DRIVER_JAVA_OPTIONS, "")
                gc = gc_option(settings.spark.gc, finite, user_options)
                chosen = f"{gc or ''} {user_options}"
                explicit, ihop = explicit_gc_option(chosen), ihop_option(chosen)
                jit = jit_option(finite, user_options)
                options = (java_options, trim, gc, explicit, ihop, jit)
                java_options = " ".join(o for o in options if o)
                if java_options:
                    conf[DRIVER_JAVA_OPTIONS] = f"{java_options} {user_options}".strip()
                for key, size in (
                    (PAGE_SIZE, task_page_size(conf)),
                    (BROADCAST_BLOCK_SIZE, broadcast_block_size(conf)),
                ):
                    if size is not None:
                        conf[key] = size
            elif allocator != SYSTEM:
                logger.warning(
                    "spark.allocator %s does not apply under spark-submit, whose JVM runs "
                    "already: give spark-submit LD_PRELOAD=libjemalloc.so.2",
                    allocator,
                )
        except EventlakeError:
            raise
        except Exception as exc:
            raise translate(exc, context="reading spark-submit's settings") from exc
        # Python UDFs and transformWithState run in worker processes started from
        # PYSPARK_PYTHON, "python3" on PATH by default: not this environment's packages.
        # As with spark-submit, spark.pyspark.python (the executors' Python) wins.
        if conf.get("spark.pyspark.python"):
            os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        master = conf["spark.master"]
        log = settings.log_file()
        scratch = None
        if submitted is None and SparkContext._active_spark_context is None:
            scratch = claim_scratch(settings.scratch_root())
            conf.update(scratch_conf(scratch, conf, master))
        builder = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        try:
            preloading = _preload(PRELOADED_MODULES)
            # The JVM holds the scratch folder's lock as long as it lives.
            _start_jvm(conf, log, (scratch.lock_fd,) if scratch else (), ld_preload, class_path)
            preloading.join()
            session = builder.getOrCreate()
        except Exception as exc:
            raise translate(exc, context=f"starting Spark (its log: {log})") from exc
        session.sparkContext.setLogLevel(settings.spark.log_level)
        for gone in scratch.removed if scratch else ():
            logger.info("removed the scratch folder of a process gone: %s", gone)
        if not master.startswith("local"):
            # In the scratch folder, not /tmp: executors started late fetch it from there.
            ship_code(session.sparkContext, scratch.path / "code" if scratch else None)
            cores = str(cluster_cores(session, master))
            for key in (SHUFFLE_PARTITIONS, SNAPSHOT_PARTITIONS):
                if key not in conf:
                    session.conf.set(key, cores)
        return session
