"""`make soak`: the orders pipeline (all seven flows) and the users CDC pipeline running
for a long time at steady rates, with the run's table maintenance on and then off.

Both pipelines run in one driver process (one JVM) on their shipped triggers, against
the embedded broker and PostgreSQL, while producers (processes of their own, so that the
driver's memory is the run's) send orders and Debezium change events at fixed rates.
Order event time runs :data:`SPEED` times faster than the wall clock, so
``gold/revenue_hourly`` closes an hour every 10 s. Every minute the phase
samples:

- batch time p50/p99 per flow (Spark's progress events of that minute);
- driver (Python) and JVM resident memory, and the JVM heap in use;
- the JVM's memory by NMT category, what is resident outside it, and RocksDB's share of
  that (the block cache its instances share); the driver's C heap, in use and held free;
  then the JVM's resident memory again once glibc has given back what it held free;
- per Delta table the files and bytes its current version reads, and those on disk (read
  by delta-rs in a process of its own, so that its memory is not the driver's);
- the checkpoints' files and bytes, and the state stores' bytes.

After the run, from the tables' commit times: produce -> ``silver/orders`` latency and
closed hour -> ``gold/revenue_hourly`` latency, per minute; and what each process's C
allocator held free, given back by a trim. The first minute after both
pipelines are planned is warm-up and left out of every figure. Samples go to a file as
they are taken: the driver whose memory is measured keeps none of them.

``python -m bench.soak [--minutes 30] [--only on,off]`` writes bench/results/soak.json,
soak.md and one PNG per figure (drawn by :mod:`bench.plot_soak` in the bench venv).
``python -m bench.soak phase ...`` is one phase, in a fresh process (its own JVM).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import multiprocessing
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.fresh import in_fresh_process
from bench.latency import paced, percentiles, rows_by_version
from bench.medallion import EVENT_START, SPEED, WINDOW_DELAY, epoch, order_record
from bench.run import BENCH_PYTHON, RESULTS, machine
from bench.state_growth import STATE_MEMORY_CONF, measure_state_growth, state_bytes
from eventlake.session import DRIVER_JAVA_OPTIONS
from eventlake.testing import resident_bytes

MINUTES = 30
WARMUP_SECONDS = 60
SAMPLE_SECONDS = 60
ORDERS_RATE = 500
CDC_RATE = 50
#: Distinct users the change events touch: the MERGE targets hold at most this many.
CDC_USERS = 5_000
PG_PASSWORD_ENV = "EVENTLAKE_SOAK_PG_PASSWORD"
#: Extra ``spark.conf`` of every phase (JSON), from ``--spark-conf KEY=VALUE``.
SPARK_CONF_ENV = "EVENTLAKE_SOAK_SPARK_CONF"
#: Maintenance settings of the phase with maintenance on (JSON), from ``--maintenance``.
MAINTENANCE_ENV = "EVENTLAKE_SOAK_MAINTENANCE"
#: The driver JVM's ``spark.allocator`` in every phase, from ``--allocator``.
ALLOCATOR_ENV = "EVENTLAKE_SOAK_ALLOCATOR"
#: "0": the driver JVM without native memory tracking, from ``--no-native-tracking``.
NATIVE_TRACKING_ENV = "EVENTLAKE_SOAK_NATIVE_TRACKING"
#: ``spark.driver_mmap_threshold`` of every phase, from ``--driver-mmap-threshold``.
DRIVER_MMAP_THRESHOLD_ENV = "EVENTLAKE_SOAK_DRIVER_MMAP_THRESHOLD"
#: A folder for a tracemalloc snapshot of the driver each minute (with PYTHONTRACEMALLOC).
TRACEMALLOC_DIR_ENV = "EVENTLAKE_SOAK_TRACEMALLOC_DIR"
#: Minutes compared at each end of a phase.
WINDOW_MINUTES = 10
#: RocksDB's budget for all state stores (Spark's default is 500 MB), sized to this load's
#: state (about 20 MiB on disk), as a deployment sizes it to its own. The shared cache keeps
#: the blocks of compacted files until the budget is full: at 500 MB this load fills it in
#: about ten hours, at 32 MB within the first half hour, so what the JVM's memory does after
#: that is not the cache filling. ``--spark-conf`` wins.
STATE_MEMORY_MB = 32


#: The driver JVM tracks its own memory by category (heap, classes, threads, code, GC...):
#: read with ``jcmd PID VM.native_memory summary``. Memory native libraries allocate
#: themselves (RocksDB's memtables and caches) is not among them.
NMT_OPTION = "-XX:NativeMemoryTracking=summary"
#: The driver JVM logs each safepoint (its GC pauses among them) to this file in the phase's
#: folder: a pause of the whole JVM is one long safepoint, a stall of the machine is not.
SAFEPOINT_LOG = "jvm-safepoints.log"
_SAFEPOINT = re.compile(r'^\[([^\]]+)\]\[[^\]]+\] Safepoint "([^"]+)".*Total: (\d+) ns')
#: A wake-up of :class:`StallWatch` this much later than asked is a stall of the driver.
STALL_SECONDS = 1.0
NMT_LINE = re.compile(r"^-\s+(.+?) \(reserved=\d+KB, committed=(\d+)KB\)")
NMT_TOTAL = re.compile(r"^Total: reserved=\d+KB, committed=(\d+)KB")


def _jcmd(pid: int, *command: str) -> str | None:
    """What ``jcmd PID COMMAND...`` prints; None when jcmd cannot run or answer in time."""
    try:
        return subprocess.run(["jcmd", str(pid), *command],
                              capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None


def jvm_committed(pid: int) -> dict[str, int]:
    """Bytes the JVM has committed, by NMT category and ``Total`` ({} without NMT)."""
    if (out := _jcmd(pid, "VM.native_memory", "summary", "scale=KB")) is None:
        return {}
    found: dict[str, int] = {}
    for line in out.splitlines():
        line = line.strip()
        if m := NMT_TOTAL.match(line):
            found["Total"] = int(m.group(1)) * 1024
        elif m := NMT_LINE.match(line):
            found[m.group(1).strip()] = int(m.group(2)) * 1024
    return found


HEAP_RANGE = re.compile(r"\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)")


def heap_range(pid: int) -> tuple[int, int] | None:
    """The addresses the JVM reserved for its Java heap (``jcmd PID GC.heap_info``)."""
    if (out := _jcmd(pid, "GC.heap_info")) is None:
        return None
    m = HEAP_RANGE.search(out)
    return (int(m.group(1), 16), int(m.group(2), 16)) if m else None


def _smaps(pid: int | str, field: str) -> Iterator[tuple[int, int, str, int]]:
    """Each mapping of process ``pid`` (``/proc/PID/smaps``): its start and end address, its
    path ("" for anonymous memory) and its ``field`` (``Rss``, ``Anonymous``...) in bytes."""
    start = end = 0
    path = ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(a, 16) for a in head.split("-"))
                parts = line.split()
                path = parts[5] if len(parts) > 5 else ""
            elif head == f"{field}:":
                yield start, end, path, int(line.split()[1]) * 1024


def resident_in(pid: int, low: int, high: int) -> int:
    """Resident bytes of process ``pid``'s mappings between ``low`` and ``high``
    (``/proc/PID/smaps``): for the heap's range, the heap pages touched so far."""
    return sum(b for start, end, _, b in _smaps(pid, "Rss") if low <= start and end <= high)


#: glibc maps each thread arena's heap at an address aligned to its largest size (64-bit).
GLIBC_HEAP_MAX = 64 << 20
#: The threads of delta-rs's I/O runtime: it keeps as many as one read ever ran at once.
IO_THREAD = "tokio-rt-worker"


def driver_mappings(pid: int | str = "self") -> dict[str, int]:
    """Where process ``pid``'s anonymous resident memory is (``/proc/PID/smaps``): glibc's
    main arena (``[heap]``), its thread arenas, and the rest (Python's object arenas,
    delta-rs's jemalloc, pyarrow's pool, thread stacks); and its threads, delta-rs's I/O
    threads among them. Which of them grows is what a growing RssAnon is."""
    main = arenas = other = 0
    for start, end, path, anonymous in _smaps(pid, "Anonymous"):
        if path == "[heap]":
            main += anonymous
        elif not path and start % GLIBC_HEAP_MAX == 0 and end - start <= GLIBC_HEAP_MAX:
            arenas += anonymous
        else:
            other += anonymous
    names = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            names.append(Path(f"/proc/{pid}/task/{task}/comm").read_text().strip())
        except OSError:  # the thread ended
            continue
    return {"driver_main_arena_bytes": main, "driver_thread_arenas_bytes": arenas,
            "driver_other_anon_bytes": other, "driver_threads": len(names),
            "driver_io_threads": names.count(IO_THREAD)}  # fmt: skip


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


def driver_malloc() -> dict[str, int]:
    """The driver process's C heap (glibc's ``mallinfo2``, every arena): bytes in use
    (``uordblks`` and mmapped blocks) and bytes free but kept by the allocator
    (``fordblks``); {} where glibc has no ``mallinfo2``. Native libraries in the driver
    (delta-rs, librdkafka, pyarrow without its own pool) allocate here."""
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return {}
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return {"driver_malloc_used_bytes": int(info.uordblks + info.hblkhd),
            "driver_malloc_free_bytes": int(info.fordblks)}  # fmt: skip


def driver_arrow() -> dict[str, int]:
    """Bytes pyarrow's default memory pool has allocated and not freed in the driver."""
    import pyarrow as pa

    return {"driver_arrow_bytes": int(pa.total_allocated_bytes())}


TRIM_LINE = re.compile(r"RSS\+Swap: ([\d.]+)([KMG])->([\d.]+)([KMG])")
UNIT = {"K": 2**10, "M": 2**20, "G": 2**30}


def jvm_trim(jvm_pid: int) -> tuple[int, int] | None:
    """The JVM's C allocator asked to give back what it holds free (``jcmd PID
    System.trim_native_heap``): its resident bytes before and after, as HotSpot reports
    them; None when jcmd cannot."""
    if (out := _jcmd(jvm_pid, "System.trim_native_heap")) is None:
        return None
    if m := TRIM_LINE.search(out):  # HotSpot prints each in K, M or G
        return (int(float(m.group(1)) * UNIT[m.group(2)]),
                int(float(m.group(3)) * UNIT[m.group(4)]))  # fmt: skip
    return None


def trimmed(jvm_pid: int) -> dict[str, int]:
    """Resident bytes each process's C allocator held free and gave back when asked
    (glibc's ``malloc_trim``: the driver's directly, the JVM's with :func:`jvm_trim`), and
    the resident bytes before. Taken once, after the last sample: memory the allocators
    keep is not memory anything uses."""
    from eventlake.operations.native_trim import malloc_trim

    found: dict[str, int] = {}
    before = resident_bytes("self")
    if (trim := malloc_trim()) is not None:
        trim()
        found = {"driver_rss_bytes": before, "driver_freed_bytes": before - resident_bytes("self")}
    if (jvm := jvm_trim(jvm_pid)) is not None:
        found |= {"jvm_rss_bytes": jvm[0], "jvm_freed_bytes": jvm[0] - jvm[1]}
    return found


def _tree(path: Path) -> tuple[int, int]:
    """(files, bytes) under ``path``."""
    files = size = 0
    for folder, _dirs, names in os.walk(path):
        for name in names:
            with contextlib.suppress(FileNotFoundError):  # removed by a VACUUM meanwhile
                size += (Path(folder) / name).stat().st_size
                files += 1
    return files, size


def _tables(lake: Path) -> list[Path]:
    return sorted(p.parent for p in lake.rglob("_delta_log") if p.is_dir())


def _table_sample(path: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    sizes = table.get_add_actions(flatten=True).column("size_bytes").to_pylist()
    data = [f for f in path.rglob("*.parquet") if "_delta_log" not in f.parts]
    disk_bytes = sum(f.stat().st_size for f in data if f.exists())
    log_files, _ = _tree(path / "_delta_log")
    return {"version": table.version(), "files": len(sizes), "bytes": sum(sizes),
            "disk_files": len(data), "disk_bytes": disk_bytes, "log_files": log_files}  # fmt: skip


def table_samples(lake: Path) -> dict[str, dict[str, int]]:
    """:func:`_table_sample` of every table under ``lake``, by its path in the lake."""
    tables: dict[str, dict[str, int]] = {}
    for path in _tables(lake):
        try:
            tables[str(path.relative_to(lake))] = _table_sample(path)
        except Exception as e:  # a table being created; its next sample counts
            print(f"[soak] {path}: {e}", file=sys.stderr, flush=True)
    return tables


def copy_commits(lake: Path, copies: Path) -> int:
    """Copy each table's commit files under ``lake`` that are not yet in ``copies`` (the
    same layout); how many. The run's maintenance trims a log to
    ``maintenance.log_retention_commits``, and the latencies and compactions are read from
    every commit of the soak after it."""
    from eventlake.connectors.delta.commits import COMMIT_FILE

    copied = 0
    for path in _tables(lake):
        target = copies / path.relative_to(lake) / "_delta_log"
        target.mkdir(parents=True, exist_ok=True)
        have = set(os.listdir(target))
        for name in os.listdir(path / "_delta_log"):
            if COMMIT_FILE.match(name) and name not in have:
                with contextlib.suppress(FileNotFoundError):  # trimmed since the listing
                    shutil.copyfile(path / "_delta_log" / name, target / name)
                    copied += 1
    return copied


def _commit_infos(log: Path) -> dict[int, dict[str, Any]]:
    """Each commit's ``commitInfo`` in the (copied) log folder ``log``, by version."""
    from eventlake.connectors.delta.commits import commit_versions

    infos = {}
    for version in commit_versions(os.listdir(log)):
        for line in (log / f"{version:020d}.json").read_text().splitlines():
            action = json.loads(line) if line else {}
            if "commitInfo" in action:
                infos[version] = action["commitInfo"]
    return infos


def compactions(lake: Path, copies: Path) -> dict[str, dict[str, int]]:
    """Per table, its compactions (OPTIMIZE commits, from the copies of its commits): how
    many, the bytes they rewrote together and at most in one, against the bytes the table
    holds."""
    from deltalake import DeltaTable

    found = {}
    for path in _tables(lake):
        table = DeltaTable(str(path))
        infos = _commit_infos(copies / path.relative_to(lake) / "_delta_log").values()
        rewritten = [int((c.get("operationMetrics") or {}).get("numRemovedBytes") or 0)
                     for c in infos if c.get("operation") == "OPTIMIZE"]  # fmt: skip
        sizes = table.get_add_actions(flatten=True).column("size_bytes").to_pylist()
        found[str(path.relative_to(lake))] = {
            "count": len(rewritten), "rewritten_bytes": sum(rewritten),
            "largest_bytes": max(rewritten, default=0), "table_bytes": sum(sizes),
        }  # fmt: skip
    return found


class Sampler(threading.Thread):
    """Once a minute: the batch times of that minute per flow, memory, tables, checkpoints;
    the tables' new commits copied to ``copies`` (:func:`copy_commits`)."""

    def __init__(self, spark: Any, lake: Path, checkpoints: Path, since: float,
                 records: Path, copies: Path) -> None:  # fmt: skip
        super().__init__(daemon=True, name="soak-sampler")
        self.lake, self.checkpoints, self.since = lake, checkpoints, since
        self.copies = copies
        # Samples go to a file, not to a list: the driver's memory is what is measured, and
        # a list growing every minute would be a trend of the benchmark's own making.
        self.records = records
        jvm = spark._jvm
        self.jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        self.heap = heap_range(self.jvm_pid)
        self.runtime = jvm.java.lang.Runtime.getRuntime()
        pool_class = jvm.java.lang.Class.forName("java.lang.management.BufferPoolMXBean")
        self.buffer_pools = list(
            jvm.java.lang.management.ManagementFactory.getPlatformMXBeans(pool_class)
        )
        management = jvm.java.lang.management.ManagementFactory
        self.class_loading = management.getClassLoadingMXBean()
        self.compilation = management.getCompilationMXBean()
        self.codegen = jvm.org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator
        self.codegen_compiles = (
            jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
        )
        state = jvm.org.apache.spark.sql.execution.streaming.state
        self.rocksdb_manager = state.RocksDBMemoryManager
        module = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.execution.streaming.state.RocksDBMemoryManager$"
        )
        self.rocksdb_cache_field = module.getDeclaredField("cache")
        self.rocksdb_cache_field.setAccessible(True)
        # delta-rs reads the tables in a process of its own: its memory is not the driver's.
        self._reader = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._batches: dict[str, list[float]] = defaultdict(list)
        self._phases: dict[str, list[dict[str, int]]] = defaultdict(list)
        self._last: dict[str, int] = {}  # per query, the last batch counted

    def observe(self, progress: Any) -> None:
        """A progress observer: each batch's duration once, from the end of the warm-up."""
        if (
            progress.batch_id <= self._last.get(progress.query, -1)
            or progress.timestamp < self.since
        ):
            return
        self._last[progress.query] = progress.batch_id
        with self._lock:
            self._batches[progress.query].append(progress.batch_duration_ms / 1000)
            self._phases[progress.query].append(progress.phases_ms)

    def samples(self) -> list[dict[str, Any]]:
        """Every sample taken, in order."""
        if not self.records.exists():
            return []
        return [json.loads(line) for line in self.records.read_text().splitlines()]

    def nio_buffers(self) -> dict[str, int]:
        """NIO's direct and mapped buffers (direct ones are in NMT's "Other"): bytes, count."""
        found = {}
        for pool in self.buffer_pools:
            if (name := pool.getName()) in ("direct", "mapped"):
                found[f"jvm_{name}_buffer_bytes"] = int(pool.getMemoryUsed())
                found[f"jvm_{name}_buffer_count"] = int(pool.getCount())
        return found

    def compiled(self) -> dict[str, int]:
        """Running totals of what fills metaspace and the code cache: classes loaded and
        unloaded, Spark's generated classes (each a fresh class when its code differs, e.g.
        by a literal) and the time compiling them, and the JIT's compile time."""
        return {"jvm_classes_live": int(self.class_loading.getLoadedClassCount()),
                "jvm_classes_loaded_total": int(self.class_loading.getTotalLoadedClassCount()),
                "jvm_classes_unloaded_total": int(self.class_loading.getUnloadedClassCount()),
                "jit_ms_total": int(self.compilation.getTotalCompilationTime()),
                "codegen_compiles_total": int(self.codegen_compiles.getCount()),
                "codegen_ms_total": int(self.codegen.compileTime()) // 1_000_000}  # fmt: skip

    def rocksdb(self) -> dict[str, int]:
        """RocksDB's native memory, which NMT does not see: the block cache all instances
        share under ``boundedMemoryUsage`` (their memtables are charged to it), and what
        Spark's memory manager adds up over its instances."""
        found = {"rocksdb_instances": int(self.rocksdb_manager.getNumRocksDBInstances(True)),
                 "rocksdb_reported_bytes": int(self.rocksdb_manager.getMemBytesUsed())}  # fmt: skip
        cache = self.rocksdb_cache_field.get(None)  # created with the first instance
        found["rocksdb_cache_bytes"] = int(cache.getUsage()) if cache is not None else 0
        found["rocksdb_pinned_bytes"] = int(cache.getPinnedUsage()) if cache is not None else 0
        return found

    def run(self) -> None:
        minute = 0
        with self._reader:
            while not self.done.wait(max(0.0, self.since + (minute + 1) * SAMPLE_SECONDS
                                         - time.time())):  # fmt: skip
                minute += 1
                self.sample(minute)

    def sample(self, minute: int) -> None:
        with self._lock:
            batches, self._batches = self._batches, defaultdict(list)
            phases, self._phases = self._phases, defaultdict(list)
        rt = self.runtime
        checkpoint_files, checkpoint_bytes = _tree(self.checkpoints)
        tables = self._reader.submit(table_samples, self.lake).result(timeout=300)
        self._reader.submit(copy_commits, self.lake, self.copies).result(timeout=300)
        committed = jvm_committed(self.jvm_pid)
        jvm_rss = resident_bytes(self.jvm_pid)
        untracked = jvm_rss - committed.get("Total", jvm_rss)
        rocksdb = self.rocksdb()
        s: dict[str, Any] = {
            "minute": minute,
            "at": time.time(),
            "batches": {
                q: {
                    "count": len(v),
                    "p50": round(statistics.median(v), 3),
                    "p99": percentiles(v).get("p99"),
                    "max": round(max(v), 3),
                    "all": [round(d, 3) for d in v],
                }
                for q, v in sorted(batches.items())
                if v
            },
            # Per flow, the median milliseconds of each of Spark's phases of a batch.
            "phases": {q: _phase_medians(v) for q, v in sorted(phases.items()) if v},
            "driver_rss_bytes": resident_bytes("self"),
            "driver_rss_anon_bytes": resident_bytes("self", "RssAnon"),
            "driver_rss_file_bytes": resident_bytes("self", "RssFile"),
            # Python's own objects: a leak of them grows these with the RSS.
            "driver_allocated_blocks": sys.getallocatedblocks(),
            "driver_gc_objects": len(gc.get_objects()),
            **driver_malloc(),
            **driver_mappings(),
            **driver_arrow(),
            "jvm_rss_bytes": jvm_rss,
            "jvm_rss_anon_bytes": resident_bytes(self.jvm_pid, "RssAnon"),
            "jvm_rss_file_bytes": resident_bytes(self.jvm_pid, "RssFile"),
            "jvm_heap_used_bytes": int(rt.totalMemory()) - int(rt.freeMemory()),
            "jvm_committed_bytes": committed.get("Total", 0),
            "jvm_committed": committed,
            # Resident memory NMT does not account for, and the same less RocksDB's cache.
            "jvm_untracked_bytes": untracked,
            "jvm_untracked_less_rocksdb_bytes": untracked - rocksdb["rocksdb_cache_bytes"],
            **rocksdb,
            **self.nio_buffers(),
            **self.compiled(),
            "tables": tables,
            "checkpoint_files": checkpoint_files,
            "checkpoint_bytes": checkpoint_bytes,
            "state_bytes": state_bytes(self.checkpoints),
        }
        # The heap's pages count once touched, up to -Xmx: the rest is the JVM's own.
        if self.heap is not None:
            s["jvm_heap_resident_bytes"] = resident_in(self.jvm_pid, *self.heap)
            s["jvm_rss_less_heap_bytes"] = jvm_rss - s["jvm_heap_resident_bytes"]
        # Then the JVM's resident memory with what glibc held free given back (it trims
        # every minute itself; how much it holds at a sample is chance): memory in use.
        if (jvm := jvm_trim(self.jvm_pid)) is not None:
            s["jvm_rss_trimmed_bytes"] = jvm[1]
            if "jvm_heap_resident_bytes" in s:
                s["jvm_rss_trimmed_less_heap_bytes"] = jvm[1] - s["jvm_heap_resident_bytes"]
            s["jvm_untracked_trimmed_less_rocksdb_bytes"] = (
                jvm[1] - committed.get("Total", jvm[1]) - rocksdb["rocksdb_cache_bytes"]
            )
        if tracemalloc.is_tracing():  # PYTHONTRACEMALLOC=N and TRACEMALLOC_DIR_ENV: where
            s["driver_traced_bytes"] = tracemalloc.get_traced_memory()[0]
            if folder := os.environ.get(TRACEMALLOC_DIR_ENV):
                tracemalloc.take_snapshot().dump(f"{folder}/minute-{minute:03d}.snapshot")
        with self.records.open("a") as f:
            f.write(json.dumps(s) + "\n")
        slowest = max(s["batches"].items(), key=lambda kv: kv[1]["p99"] or 0, default=None)
        print(f"[soak] minute {minute}: {sum(t['files'] for t in tables.values())} files in "
              f"{len(tables)} tables, driver {s['driver_rss_bytes'] >> 20} MiB, JVM "
              f"{s['jvm_rss_bytes'] >> 20} MiB, checkpoints {checkpoint_files} files, slowest "
              f"p99 {slowest}", file=sys.stderr, flush=True)  # fmt: skip


def _settings(bootstrap: str, root: Path, pg_port: int, maintenance: bool) -> Any:
    from eventlake.config.loader import settings_from_dict

    phase = "on" if maintenance else "off"  # each phase its own topics on the one broker

    return settings_from_dict({
        "kafka": {"bootstrap_servers": bootstrap},
        "lake": {"root": str(root / "lake")},
        "checkpoints": {"root": str(root / "checkpoints")},
        "project": {"examples": True},
        "maintenance": {"enabled": maintenance, **_chosen_maintenance()},
        "postgres": {"port": pg_port, "password": os.environ[PG_PASSWORD_ENV]},
        "spark": {"conf": _spark_conf(root), "allocator": _chosen_allocator(),
                  "driver_mmap_threshold": _chosen_mmap_threshold()},
        "pipelines": {
            "orders": {"topic": f"soak-{phase}-orders",
                       "high_value_topic": f"soak-{phase}-high-value"},
            "users": {"topic": f"soak-{phase}-users-cdc",
                      "state_topic": f"soak-{phase}-users-state",
                      "postgres_table": f"soak_{phase}_users"},
        },
    })  # fmt: skip


def _chosen_maintenance() -> dict[str, Any]:
    """The ``maintenance`` settings ``--maintenance`` gives (values parsed as JSON)."""
    return dict(json.loads(os.environ.get(MAINTENANCE_ENV) or "{}"))


def _chosen_conf() -> dict[str, str]:
    """The soak's RocksDB budget and ``--spark-conf`` (which wins)."""
    return {STATE_MEMORY_CONF: str(STATE_MEMORY_MB),
            **json.loads(os.environ.get(SPARK_CONF_ENV) or "{}")}  # fmt: skip


def _chosen_mmap_threshold() -> int:
    """The driver's ``spark.driver_mmap_threshold``: ``--driver-mmap-threshold``, else
    eventlake's default."""
    from eventlake.config.model import SparkSettings

    default = SparkSettings.model_fields["driver_mmap_threshold"].default
    return int(os.environ.get(DRIVER_MMAP_THRESHOLD_ENV) or default)


def _chosen_allocator() -> str:
    """The driver JVM's ``spark.allocator``: ``--allocator``, else the system's malloc."""
    return os.environ.get(ALLOCATOR_ENV, "system")


def _native_tracking() -> bool:
    """Whether the driver JVM tracks its native memory: yes unless ``--no-native-tracking``."""
    return os.environ.get(NATIVE_TRACKING_ENV) != "0"


def _spark_conf(root: Path) -> dict[str, str]:
    """:func:`_chosen_conf`, with the driver JVM tracking its memory by category (unless
    ``--no-native-tracking``) and logging its safepoints to ``root``/:data:`SAFEPOINT_LOG`."""
    conf = _chosen_conf()
    key = DRIVER_JAVA_OPTIONS
    tracking = NMT_OPTION if _native_tracking() else ""
    conf[key] = f"{tracking} {safepoint_option(root / SAFEPOINT_LOG)} {conf.get(key, '')}".strip()
    return conf


def safepoint_option(log: Path) -> str:
    """The JVM option that logs every safepoint to ``log``, each line with its UTC time."""
    return f"-Xlog:safepoint:file={log}:utctime,uptime"


def safepoints(log: Path, since: float, until: float, top: int = 5) -> dict[str, Any]:
    """The driver JVM's safepoints that began in the sampled minutes, ``since`` to
    ``until`` (epoch seconds), from ``log`` and the files the JVM rotated it into: how
    many, their seconds in total, and the ``top`` longest with the minute each began in."""
    found: list[dict[str, Any]] = []
    for path in sorted(log.parent.glob(f"{log.name}*")):
        for line in path.read_text(errors="replace").splitlines():
            if (m := _SAFEPOINT.match(line)) is None:
                continue
            seconds = int(m.group(3)) / 1e9
            began = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() - seconds
            if since <= began < until:
                found.append({"at": round(began, 3), "minute": _minute_of(began, since) + 1,
                              "operation": m.group(2), "seconds": round(seconds, 4)})  # fmt: skip
    longest = sorted(found, key=lambda f: -f["seconds"])[:top]
    return {"count": len(found), "seconds": round(sum(f["seconds"] for f in found), 4),
            "longest": longest}  # fmt: skip


class StallWatch(threading.Thread):
    """Wakes every quarter second and records each wake-up at least :data:`STALL_SECONDS`
    late: the driver's Python held up, by the machine or its own interpreter, which a JVM
    pause alone does not do."""

    def __init__(self, since: float) -> None:
        super().__init__(name="soak-stall-watch", daemon=True)
        self.since = since
        self.done = threading.Event()
        self.stalls: list[dict[str, Any]] = []

    def run(self) -> None:
        while True:
            asked = time.monotonic()
            if self.done.wait(0.25):
                return
            late = time.monotonic() - asked - 0.25
            if late >= STALL_SECONDS:
                at = time.time() - late
                self.stalls.append({"at": round(at, 3), "minute": _minute_of(at, self.since) + 1,
                                    "seconds": round(late, 3)})  # fmt: skip


def pauses(phase: dict[str, Any]) -> list[str]:
    """soak.md's lines on the driver JVM's safepoints and the driver's stalls, where the
    phase recorded them."""
    if (points := phase.get("safepoints")) is None:
        return []
    longest = ", ".join(f"{p['seconds']:.3f} s ({p['operation']}, minute {p['minute']})"
                        for p in points["longest"])  # fmt: skip
    stalls = phase.get("driver_stalls") or []
    late = ", ".join(f"{s['seconds']:.1f} s (minute {s['minute']})" for s in stalls[:5])
    return [
        f"\nThe driver JVM's safepoints (its GC pauses among them): {points['count']:,}, "
        f"{points['seconds']:.1f} s in all; the longest {longest or '-'}.",
        (
            f"\nThe driver's Python woke {STALL_SECONDS:.0f} s or more late {len(stalls)} "
            f"times: {late}."
            if stalls
            else f"\nThe driver's Python never woke {STALL_SECONDS:.0f} s or more late."
        ),
    ]


def _minute_of(at: float, since: float) -> int:
    return int((at - since) // SAMPLE_SECONDS)


def _latencies(
    settings: Any, w0: float, since: float, copies: Path
) -> dict[str, dict[int, list[float]]]:
    """Per minute after the warm-up: produce -> silver/orders (each row) and closed hour ->
    gold/revenue_hourly (each hour), from the versions' commit times (the ``copies`` of
    the commits, :func:`copy_commits`)."""
    from eventlake.storage import Location

    def log(layer: str, table: str) -> Path:
        return copies / layer / table / "_delta_log"

    def commits(layer: str, table: str) -> dict[int, float]:
        return {v: c["timestamp"] / 1000 for v, c in _commit_infos(log(layer, table)).items()}

    def rows(layer: str, table: str, columns: list[str]) -> dict[int, list[dict[str, Any]]]:
        path = settings.lake.table_path(layer, table)
        return rows_by_version(path, columns, Location(log(layer, table)))

    produced = {(r["partition"], r["offset"]): epoch(r["kafka_timestamp"])
                for rows_ in rows("bronze", "orders", ["partition", "offset",
                                                       "kafka_timestamp"]).values()
                for r in rows_}  # fmt: skip
    out: dict[str, dict[int, list[float]]] = {"silver": defaultdict(list),
                                              "gold": defaultdict(list)}  # fmt: skip
    at = commits("silver", "orders")
    for v, silver_rows in rows("silver", "orders", ["partition", "offset"]).items():
        for r in silver_rows:
            sent = produced.get((r["partition"], r["offset"]))
            if sent is not None and sent >= since:
                out["silver"][_minute_of(at[v], since)].append(at[v] - sent)
    at = commits("gold", "revenue_hourly")
    shown: dict[float, float] = {}
    for v, gold_rows in rows("gold", "revenue_hourly", ["window_end"]).items():
        for r in gold_rows:
            shown.setdefault(epoch(r["window_end"]), at[v])
    for end, when in shown.items():
        # The first order whose event time passed the hour's end plus the watermark delay
        # was produced at this wall time (event time is a function of the wall clock).
        closed = w0 + (end + WINDOW_DELAY.total_seconds() - EVENT_START.timestamp()) / SPEED
        if closed >= since:
            out["gold"][_minute_of(when, since)].append(when - closed)
    return out


def _produce_orders(bootstrap: str, topic: str, rate: float, w0: float, until: float) -> None:
    """Orders at ``rate`` a second from wall time ``w0`` to ``until``, their event time a
    function of the wall clock."""
    from eventlake.kafka import produce

    def order_at(i: int, wall: float) -> tuple[str, str]:
        return order_record(i, EVENT_START + timedelta(seconds=(wall - w0) * SPEED))

    produce(bootstrap, topic, paced(rate, w0, until, order_at))


def _send_changes(bootstrap: str, topic: str, cdc_rate: float, w0: float, until: float) -> None:
    """The users' CDC changes at ``cdc_rate`` a second until wall time ``until``."""
    from eventlake.generator import CdcConfig, CdcGenerator, send
    from eventlake.generator import paced as paced_records

    changes = CdcGenerator(CdcConfig(seed=7, users=CDC_USERS)).records(
        int(cdc_rate * (until - w0)) + 1
    )
    send(bootstrap, topic, paced_records(changes, cdc_rate, until - time.time()))


def _phase(bootstrap: str, root: Path, pg_port: int, maintenance: bool, minutes: int,
           rate: float, cdc_rate: float) -> dict[str, Any]:  # fmt: skip
    from eventlake.kafka import create_topic
    from eventlake.monitoring import ProgressListener
    from eventlake.pipelines.loader import load_pipelines
    from eventlake.run import run_pipeline
    from eventlake.session import driver_allocators, get_spark

    settings = _settings(bootstrap, root, pg_port, maintenance)
    driver_allocators(settings)  # first, as `eventlake run` does
    orders, users = settings.pipelines["orders"], settings.pipelines["users"]
    for topic, partitions in ((orders["topic"], 3), (orders["high_value_topic"], 1),
                              (users["topic"], 3), (users["state_topic"], 1)):  # fmt: skip
        create_topic(bootstrap, topic, partitions=partitions)
    spark = get_spark(settings)
    registry = load_pipelines(examples=True)
    stop = threading.Event()
    planned: list[str] = []
    both_planned = threading.Event()

    def on_plan(name: str) -> Any:
        def mark(_plan: object, _report: object) -> None:
            planned.append(name)
            if len(planned) == 2:
                both_planned.set()

        return mark

    listeners = [ProgressListener(show=False) for _ in range(2)]
    runs = [
        threading.Thread(
            target=run_pipeline,
            name=f"soak-{name}",
            args=(name, settings),
            kwargs={
                "registry": registry,
                "stop": stop,
                "listener": listener,
                "on_plan": on_plan(name),
            },
        )
        for name, listener in zip(("orders", "users"), listeners, strict=True)
    ]
    for r in runs:
        r.start()
    if not both_planned.wait(600):
        raise RuntimeError(f"pipelines not planned in 10 minutes: {planned}")
    w0 = time.time()
    since = w0 + WARMUP_SECONDS
    until = since + minutes * 60
    copies = root / "commits"
    sampler = Sampler(spark, settings.lake.root.path, settings.checkpoints.root.path, since,
                      root / "samples.jsonl", copies)  # fmt: skip
    listeners[0].observers.append(sampler.observe)  # each listener sees every query
    sampler.start()
    watch = StallWatch(since)
    watch.start()

    # The load comes from processes of their own: the driver's memory is the run's alone.
    spawn = multiprocessing.get_context("spawn")
    producers = [
        spawn.Process(target=_produce_orders, name="soak-orders-producer",
                      args=(bootstrap, orders["topic"], rate, w0, until)),
        spawn.Process(target=_send_changes, name="soak-changes-producer",
                      args=(bootstrap, users["topic"], cdc_rate, w0, until)),
    ]  # fmt: skip
    for p in producers:
        p.start()
    for p in producers:
        p.join()
    failed = [p.name for p in producers if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"the soak's producers failed: {failed}")
    sampler.done.set()
    sampler.join()
    watch.done.set()
    watch.join()
    trim = trimmed(sampler.jvm_pid)
    found = spark._jsc.sc().getAllPools()  # under FAIR, a pool per query; FIFO has none
    pools = sorted(str(found.apply(i).name()) for i in range(found.size()))
    stop.set()
    for r in runs:
        r.join()
    for listener in listeners:
        listener.close()
    copy_commits(settings.lake.root.path, copies)
    lat = _latencies(settings, w0, since, copies)
    latency = {hop: {str(m): percentiles(v) for m, v in sorted(per.items())}
               for hop, per in lat.items()}  # fmt: skip
    flows = {name: t.batches for name, t in listeners[0].snapshot().items()}
    return {"maintenance": maintenance, "minutes": minutes, "orders_per_second": rate,
            "changes_per_second": cdc_rate, "samples": sampler.samples(), "latency": latency,
            "batches": flows, "scheduler_pools": pools, "trimmed_at_end": trim,
            "compactions": compactions(settings.lake.root.path, copies),
            "safepoints": safepoints(root / SAFEPOINT_LOG, since, until),
            "driver_stalls": watch.stalls}  # fmt: skip


def _phase_medians(batches: list[dict[str, int]]) -> dict[str, float]:
    names = sorted({name for b in batches for name in b})
    return {n: statistics.median(b.get(n, 0) for b in batches) for n in names}


def _all_batches(samples: list[dict[str, Any]], flow: str) -> list[float]:
    return [d for s in samples for d in s["batches"].get(flow, {}).get("all", [])]


def _window(samples: list[dict[str, Any]], first: bool) -> list[dict[str, Any]]:
    return samples[:WINDOW_MINUTES] if first else samples[-WINDOW_MINUTES:]


def _p99_of(samples: list[dict[str, Any]], flow: str) -> float | None:
    values = [s["batches"][flow]["p99"] for s in samples if flow in s["batches"]]
    return max(values) if values else None


def _slope_per_hour(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def summary(phase: dict[str, Any]) -> dict[str, Any]:
    """The acceptance figures of one phase: batch p99 per flow (max of the minutes' p99s)
    in the first and last 10 minutes, files per table and memory at each end, trends."""
    samples = phase["samples"]
    first, last = _window(samples, True), _window(samples, False)
    flows = sorted({f for s in samples for f in s["batches"]})
    p99: dict[str, dict[str, Any]] = {}
    for f in flows:
        a, b = _p99_of(first, f), _p99_of(last, f)
        p99[f] = {"first": a, "last": b, "ratio": round(b / a, 2) if a and b else None}
        # Every batch of each window together (runs before 11-27 kept no single batches).
        pooled = [percentiles(_all_batches(w, f)) for w in (first, last)]
        if all(x.get("count") for x in pooled):
            p99[f] |= {"pooled": [x["p99"] for x in pooled], "p50": [x["p50"] for x in pooled],
                       "pooled_ratio": round(pooled[1]["p99"] / pooled[0]["p99"], 2)}  # fmt: skip
        medians = [_phase_medians([s["phases"][f] for s in w if f in s.get("phases", {})])
                   for w in (first, last)]  # fmt: skip
        if medians[0] and medians[1]:
            p99[f]["phases_ms"] = {n: [round(medians[0].get(n, 0)), round(medians[1].get(n, 0))]
                                   for n in sorted(medians[0] | medians[1])}  # fmt: skip
    tables = sorted({t for s in samples for t in s["tables"]})
    files = {}
    for t in tables:
        xs = [float(s["minute"]) for s in samples if t in s["tables"]]
        ys = [float(s["tables"][t]["files"]) for s in samples if t in s["tables"]]
        files[t] = {"first": int(ys[0]), "max": int(max(ys)), "last": int(ys[-1]),
                    "per_hour": round(_slope_per_hour(xs, ys), 1)}  # fmt: skip
    minutes = [float(s["minute"]) for s in samples]

    def mib(key: str, window: list[dict[str, Any]]) -> float:
        return round(statistics.fmean(s[key] for s in window) / 2**20, 1)

    half = len(samples) // 2  # Spark keeps 100 batches of checkpoint and state files:
    # the first quarter hour fills them, so the second half shows what still grows.
    memory = {key: {"first_mib": mib(key, first), "last_mib": mib(key, last),
                    "mib_per_hour": round(_slope_per_hour(
                        minutes, [s[key] / 2**20 for s in samples]), 1),
                    "second_half_mib_per_hour": round(_slope_per_hour(
                        minutes[half:], [s[key] / 2**20 for s in samples[half:]]), 1)}
              for key in ("driver_rss_bytes", "driver_rss_anon_bytes", "driver_rss_file_bytes",
                          "driver_malloc_used_bytes",
                          "driver_malloc_free_bytes", "driver_main_arena_bytes",
                          "driver_thread_arenas_bytes", "driver_other_anon_bytes",
                          "driver_arrow_bytes", "jvm_rss_bytes",
                          "jvm_rss_anon_bytes", "jvm_rss_file_bytes",
                          "jvm_heap_used_bytes", "jvm_committed_bytes", "jvm_untracked_bytes",
                          "rocksdb_cache_bytes", "jvm_untracked_less_rocksdb_bytes",
                          "jvm_rss_trimmed_bytes", "jvm_untracked_trimmed_less_rocksdb_bytes",
                          "jvm_heap_resident_bytes", "jvm_rss_less_heap_bytes",
                          "jvm_rss_trimmed_less_heap_bytes",
                          "jvm_direct_buffer_bytes", "checkpoint_bytes", "state_bytes")
              if all(key in s for s in samples)}  # fmt: skip
    return {"batch_p99": p99, "files": files, "memory": memory, "hourly": hourly(samples),
            "jvm_committed_growth": _committed_growth(first, last)}  # fmt: skip


#: What :func:`hourly` follows hour by hour (MiB): a sample's key, or an NMT category.
HOURLY = (("jvm_rss_bytes", "JVM RSS"),
          ("jvm_rss_trimmed_bytes", "JVM RSS, glibc's free memory given back"),
          ("Total", "NMT committed"), ("Code", "JIT code"),
          ("jvm_untracked_less_rocksdb_bytes", "JVM RSS outside NMT and RocksDB's cache"),
          ("jvm_untracked_trimmed_less_rocksdb_bytes", "the same, trimmed"),
          ("driver_rss_anon_bytes", "driver RSS, anonymous"))  # fmt: skip

#: A last part-hour shorter than this is left out of :func:`hourly` (too short for a trend).
HOURLY_MIN_MINUTES = 20


def _sampled(s: dict[str, Any], key: str) -> float | None:
    v = s.get(key, s.get("jvm_committed", {}).get(key))
    return None if v is None else float(v)


def hourly(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each hour of the phase (minutes 1-60, 61-120, ...; a last part-hour of at least
    :data:`HOURLY_MIN_MINUTES`): per measure of :data:`HOURLY`, the least-squares trend
    (MiB an hour) and the mean of the hour's last :data:`WINDOW_MINUTES` minutes (MiB).
    Whether memory levels off is read here: the whole phase's trend mixes the first hour's
    warm-up into it."""
    hours = []
    last = samples[-1]["minute"] if samples else 0
    for start in range(1, last + 1, 60):
        part = [s for s in samples if start <= s["minute"] < start + 60]
        if len(part) < HOURLY_MIN_MINUTES:
            continue
        measures = {}
        for key, _label in HOURLY:
            values = [_sampled(s, key) for s in part]
            if None in values:
                continue
            xs = [float(s["minute"]) for s in part]
            ys = [(v or 0) / 2**20 for v in values]
            level = statistics.fmean(ys[-WINDOW_MINUTES:])
            measures[key] = {"mib_per_hour": round(_slope_per_hour(xs, ys), 1),
                             "last_mib": round(level, 1)}  # fmt: skip
        hours.append({"minutes": [part[0]["minute"], part[-1]["minute"]], "measures": measures})
    return hours


def _hourly_lines(hours: list[dict[str, Any]]) -> list[str]:
    """Markdown: :func:`hourly` as a table, a measure a row."""
    if not hours:
        return []
    spans = [f"{h['minutes'][0]}-{h['minutes'][1]}" for h in hours]
    lines = [f"Hour by hour: trend (MiB an hour) and the mean of the hour's last "
             f"{WINDOW_MINUTES} minutes (MiB), minutes:", "",
             "| measure | " + " | ".join(spans) + " |", "|---|" + "---|" * len(hours)]  # fmt: skip
    for key, label in HOURLY:
        cells = [h["measures"].get(key) for h in hours]
        if all(c is None for c in cells):
            continue
        lines.append(f"| {label} | " + " | ".join(
            "-" if c is None else f"{c['mib_per_hour']:+.1f} ({c['last_mib']:,.1f})"
            for c in cells) + " |")  # fmt: skip
    return lines


#: What the levels table shows (MiB): a sample's key, or an NMT category of ``jvm_committed``.
LEVELS = (("driver_rss_anon_bytes", "driver RSS, anonymous"),
          ("driver_main_arena_bytes", "driver: glibc's main arena"),
          ("driver_thread_arenas_bytes", "driver: glibc's thread arenas"),
          ("driver_other_anon_bytes", "driver: other anonymous (Python, delta-rs, stacks)"),
          ("jvm_rss_bytes", "JVM RSS"),
          ("jvm_rss_trimmed_bytes", "JVM RSS, glibc's free memory given back"),
          ("jvm_heap_resident_bytes", "Java heap, resident"),
          ("jvm_rss_trimmed_less_heap_bytes", "JVM RSS outside the heap, trimmed"),
          ("Total", "NMT committed"), ("Code", "JIT code"), ("Metaspace", "metaspace"),
          ("rocksdb_cache_bytes", "RocksDB's cache"),
          ("jvm_untracked_trimmed_less_rocksdb_bytes",
           "JVM RSS outside NMT and RocksDB's cache, trimmed"))  # fmt: skip


#: Counts the levels table shows as they are, after the memory.
COUNTS = (("driver_threads", "driver threads"),
          ("driver_io_threads", "driver threads: delta-rs's I/O runtime"))  # fmt: skip


def _levels(samples: list[dict[str, Any]]) -> list[str]:
    """Markdown: each memory measure at minute 1 and every 10 minutes, in MiB, then the
    driver's threads."""
    picked = [s for s in samples if s["minute"] == 1 or s["minute"] % 10 == 0]
    if samples and picked[-1] is not samples[-1]:
        picked.append(samples[-1])

    def value(s: dict[str, Any], key: str) -> int | None:
        v = _sampled(s, key)
        return None if v is None else round(v / 2**20)

    rows = [(label, [value(s, key) for s in picked]) for key, label in LEVELS]
    rows += [(label, [s.get(key) for s in picked]) for key, label in COUNTS]
    rows = [(label, vs) for label, vs in rows if any(v is not None for v in vs)]
    if not rows:
        return []
    return ["Memory every 10 minutes (MiB; threads as counted):", "",
            "| measure | " + " | ".join(str(s["minute"]) for s in picked) + " |",
            "|---|" + "---|" * len(picked),
            *(f"| {label} | " + " | ".join("-" if v is None else f"{v:,}" for v in vs) + " |"
              for label, vs in rows)]  # fmt: skip


#: Running totals of each sample that :func:`_compiling` reports per minute.
COMPILE_TOTALS = ("codegen_compiles_total", "codegen_ms_total", "jit_ms_total",
                  "jvm_classes_loaded_total", "jvm_classes_unloaded_total")  # fmt: skip


def _per_minute(samples: list[dict[str, Any]], key: str) -> float:
    """How much running total ``key`` grew per minute over ``samples`` (two or more)."""
    grown = float(samples[-1][key] - samples[0][key])
    return grown / float(samples[-1]["minute"] - samples[0]["minute"])


def _compiling(samples: list[dict[str, Any]]) -> list[str]:
    """Markdown: what the JVM compiled and loaded per minute, first window -> last."""
    first, last = _window(samples, True), _window(samples, False)
    if len(first) < 2 or any(k not in s for s in samples for k in COMPILE_TOTALS):
        return []

    def pair(key: str, scale: float = 1.0, digits: int = 0) -> str:
        a, b = _per_minute(first, key), _per_minute(last, key)
        return f"{a / scale:,.{digits}f} -> {b / scale:,.{digits}f}"

    return [f"\nPer minute, first {WINDOW_MINUTES} minutes -> last: Spark compiled "
            f"{pair('codegen_compiles_total')} generated classes "
            f"({pair('codegen_ms_total', 1000, 1)} s compiling), the JIT spent "
            f"{pair('jit_ms_total', 1000, 1)} s, the JVM loaded "
            f"{pair('jvm_classes_loaded_total')} classes and unloaded "
            f"{pair('jvm_classes_unloaded_total')}; {samples[-1]['jvm_classes_live']:,} "
            "classes loaded at the end."]  # fmt: skip


def _committed_growth(first: list[dict[str, Any]], last: list[dict[str, Any]]) -> dict[str, float]:
    """MiB each NMT category grew between the first and last windows' means, largest first."""

    def mean(window: list[dict[str, Any]], category: str) -> float:
        return statistics.fmean(s.get("jvm_committed", {}).get(category, 0) for s in window)

    categories = {c for s in first + last for c in s.get("jvm_committed", {}) if c != "Total"}
    growth = {c: round((mean(last, c) - mean(first, c)) / 2**20, 1) for c in categories}
    return dict(sorted(growth.items(), key=lambda kv: -abs(kv[1])))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from pydantic import SecretStr

    from eventlake.config import PostgresSettings
    from eventlake.kafka import EmbeddedKafkaBroker
    from eventlake.postgres import EmbeddedPostgres
    from eventlake.testing import free_port

    conf = _chosen_conf()
    results: dict[str, Any] = {"machine": machine(),
                               "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "phases": {}, "spark_conf": conf,
                               "allocator": _chosen_allocator(),
                               "maintenance": _chosen_maintenance(),
                               "native_tracking": _native_tracking(),
                               "driver_mmap_threshold": _chosen_mmap_threshold()}  # fmt: skip
    logs = RESULTS / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eventlake-soak-") as tmp:
        root = Path(tmp)
        (root / "pg").mkdir()
        (root / "pg").chmod(0o755)  # the postgres user (when run as root) must reach it
        os.environ[PG_PASSWORD_ENV] = os.urandom(12).hex()
        pg = PostgresSettings(port=free_port(), password=SecretStr(os.environ[PG_PASSWORD_ENV]))
        server = EmbeddedPostgres(pg, root / "pg" / "data")
        server.start()
        try:
            with EmbeddedKafkaBroker(port=free_port(), data_dir=root / "kafka") as broker:
                only = args.only.split(",")
                for name in (n for n in only if n in ("on", "off")):
                    print(f"[soak] phase maintenance {name}: {args.minutes} min", flush=True)
                    r = in_fresh_process(
                        "bench.soak", "phase", broker.bootstrap_servers, str(root / name),
                        str(pg.port), name, str(args.minutes), str(args.rate),
                        str(args.cdc_rate), title=f"maintenance {name}", show_stderr=True,
                    )  # fmt: skip
                    (logs / f"soak-{name}.json").write_text(json.dumps(r, indent=1) + "\n")
                    for log in (root / name).glob(f"{SAFEPOINT_LOG}*"):  # the JVM's rotations
                        shutil.copy(log, logs / f"soak-{name}-{log.name}")
                    if "error" not in r:
                        r["summary"] = summary(r)
                    results["phases"][name] = r
                if "state" in only:
                    print("[soak] state growth: 100K and 10M keys", flush=True)
                    results["state_growth"] = measure_state_growth(
                        broker.bootstrap_servers, root / "state"
                    )
        finally:
            server.remove()
    return results


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    phases = results["phases"]
    any_phase: dict[str, Any] = next(iter(phases.values()), {})
    lines = [
        "# eventlake soak",
        "",
        f"{results['at']}: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, Python "
        f"{m['python']}. The `orders` pipeline (7 flows) at {any_phase.get('orders_per_second')} "
        f"orders/s and the `users` CDC pipeline at {any_phase.get('changes_per_second')} "
        f"changes/s ({CDC_USERS:,} users), one driver, shipped triggers, "
        f"{any_phase.get('minutes')} minutes after a {WARMUP_SECONDS}-second warm-up, with "
        f"the run's table maintenance {' and '.join(phases) or 'in no phase'}; sampled every "
        "minute. Batch p99: the "
        f"highest per-minute p99 of the first and of the last {WINDOW_MINUTES} minutes."
        + (f" spark.conf: `{results['spark_conf']}`." if results.get("spark_conf") else "")
        + (f" maintenance: `{results['maintenance']}`." if results.get("maintenance") else "")
        + f" The driver JVM's allocator: {results.get('allocator', 'system')}"
        + ("." if results.get("native_tracking", True) else ", no native memory tracking.")
        + (
            f" glibc's mmap threshold in the driver: {threshold:,} bytes."
            if (threshold := results.get("driver_mmap_threshold"))
            else " glibc's mmap threshold in the driver: its own."
        ),
    ]
    for name, phase in phases.items():
        lines += ["", f"## Maintenance {name}", ""]
        if "error" in phase:
            lines += phase["markdown"][2:]
            continue
        s = phase["summary"]
        lines += ["| flow | batches | batch p99, first 10 min (s) | last 10 min (s) | ratio |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for flow, p in s["batch_p99"].items():
            lines.append(f"| {flow} | {phase['batches'].get(flow, '-')} | {p['first']} "
                         f"| {p['last']} | {p['ratio']} |")  # fmt: skip
        pooled = {f: p for f, p in s["batch_p99"].items() if "pooled" in p}
        if pooled:
            lines += ["", f"Every batch of the first and of the last {WINDOW_MINUTES} minutes "
                      "together (s):", "",
                      "| flow | p99, first / last | ratio | p50, first / last |",
                      "|---|---|---|---|"]  # fmt: skip
            for flow, p in pooled.items():
                lines.append(f"| {flow} | {p['pooled'][0]} / {p['pooled'][1]} | "
                             f"{p['pooled_ratio']} | {p['p50'][0]} / {p['p50'][1]} |")  # fmt: skip
        split = {f: p["phases_ms"] for f, p in s["batch_p99"].items() if "phases_ms" in p}
        if split:
            names = sorted({n for v in split.values() for n in v} - {"triggerExecution"})
            lines += ["", "Where a batch's time goes: the median ms of each of Spark's phases "
                      f"(`durationMs`), first {WINDOW_MINUTES} minutes -> last:", "",
                      "| flow | " + " | ".join(names) + " |",
                      "|---|" + "---|" * len(names)]  # fmt: skip
            for flow, v in split.items():
                cells = [f"{v[n][0]} -> {v[n][1]}" if n in v else "-" for n in names]
                lines.append(f"| {flow} | " + " | ".join(cells) + " |")
        lines += ["", "| table | files at minute 1 | max | at the end | trend (files/hour) |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for table, f in s["files"].items():
            lines.append(f"| {table} | {f['first']} | {f['max']} | {f['last']} "
                         f"| {f['per_hour']} |")  # fmt: skip
        compacted = {t: c for t, c in phase.get("compactions", {}).items() if c["count"]}
        if compacted:
            lines += ["", "| table | compactions | MiB rewritten | most in one (MiB) "
                      "| MiB in the table |", "|---|---|---|---|---|"]  # fmt: skip
            for table, c in compacted.items():
                lines.append(f"| {table} | {c['count']} | {c['rewritten_bytes'] / 2**20:.1f} "
                             f"| {c['largest_bytes'] / 2**20:.1f} "
                             f"| {c['table_bytes'] / 2**20:.1f} |")  # fmt: skip
        lines += ["", "| measure | first 10 min (MiB) | last 10 min (MiB) | trend (MiB/hour) "
                  "| trend, second half |", "|---|---|---|---|---|"]  # fmt: skip
        for key, v in s["memory"].items():
            lines.append(f"| {key.removesuffix('_bytes')} | {v['first_mib']} | "
                         f"{v['last_mib']} | {v['mib_per_hour']} "
                         f"| {v.get('second_half_mib_per_hour', '-')} |")  # fmt: skip
        lines += ["", *_levels(phase["samples"]), *_compiling(phase["samples"])]
        if len(s.get("hourly", [])) > 1:
            lines += ["", *_hourly_lines(s["hourly"])]
        growth = [f"{c} {v:+}" for c, v in s.get("jvm_committed_growth", {}).items() if v][:5]
        if growth:
            lines.append("\nJVM committed memory by category (NMT), last 10 min against the first"
                         f" (MiB): {', '.join(growth)}.")  # fmt: skip
        if t := phase.get("trimmed_at_end"):
            lines.append(
                "\nAfter the last sample the C allocators gave back what they held free: the "
                f"driver {t.get('driver_freed_bytes', 0) / 2**20:.1f} of "
                f"{t.get('driver_rss_bytes', 0) / 2**20:.1f} MiB resident, the JVM "
                f"{t.get('jvm_freed_bytes', 0) / 2**20:.1f} of "
                f"{t.get('jvm_rss_bytes', 0) / 2**20:.1f} MiB."
            )
        lines.extend(pauses(phase))
        for hop, label in (("silver", "produce -> silver/orders"),
                           ("gold", "closed hour -> gold/revenue_hourly")):  # fmt: skip
            per = phase["latency"][hop]
            keys = sorted(per, key=int)
            head, tail = keys[:WINDOW_MINUTES], keys[-WINDOW_MINUTES:]

            def worst(ks: list[str], per: dict[str, Any] = per) -> Any:
                return max((per[k].get("p99", 0) for k in ks), default="-")

            lines.append(f"\n{label}: p99 {worst(head)} s in the first {WINDOW_MINUTES} "
                         f"minutes, {worst(tail)} s in the last.")  # fmt: skip
    if "state_growth" in results:
        lines += ["", *results["state_growth"]["markdown"]]
    lines += ["", *(f"![{p.stem}]({p.name})" for p in sorted(RESULTS.glob("soak-*.png")))]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command")
    phase = sub.add_parser("phase")
    for arg in ("bootstrap", "root", "pg_port", "maintenance", "minutes", "rate", "cdc_rate"):
        phase.add_argument(arg)
    parser.add_argument("--minutes", type=int, default=MINUTES)
    parser.add_argument("--rate", type=float, default=ORDERS_RATE)
    parser.add_argument("--cdc-rate", type=float, default=CDC_RATE)
    parser.add_argument(
        "--only",
        default="on,off,state",
        help="of: on, off (maintenance phases), state (state growth)",
    )
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="spark.conf of every phase (repeatable)")  # fmt: skip
    parser.add_argument("--maintenance", action="append", default=[], metavar="KEY=VALUE",
                        help="a maintenance setting of the phase with maintenance on "
                        "(repeatable; the value is JSON: log_retention_commits=2000)")  # fmt: skip
    parser.add_argument("--allocator", choices=("system", "jemalloc"), default="system",
                        help="the driver JVM's spark.allocator in every phase")  # fmt: skip
    parser.add_argument(
        "--no-native-tracking",
        action="store_true",
        help="no NMT in the driver JVM (no memory by category): with jemalloc, JDK 17 maps "
        "the class-data archive only without it, so batch-time A/Bs of allocators use this",
    )
    parser.add_argument(
        "--driver-mmap-threshold",
        type=int,
        default=None,
        metavar="BYTES",
        help="spark.driver_mmap_threshold of every phase (0: glibc's own; else eventlake's)",
    )
    parser.add_argument(
        "--report", action="store_true", help="only rebuild soak.md and the figures from soak.json"
    )
    args = parser.parse_args()
    if args.report:
        results = json.loads((RESULTS / "soak.json").read_text())
        for phase in results["phases"].values():
            if "error" not in phase:
                phase["summary"] = summary(phase)
        _report(results)
        return
    if args.command == "phase":
        print(json.dumps(_phase(args.bootstrap, Path(args.root), int(args.pg_port),
                                args.maintenance == "on", int(args.minutes), float(args.rate),
                                float(args.cdc_rate))))  # fmt: skip
        return
    os.environ[SPARK_CONF_ENV] = json.dumps(dict(kv.split("=", 1) for kv in args.spark_conf))
    os.environ[MAINTENANCE_ENV] = json.dumps(
        {key: json.loads(value) for key, value in (kv.split("=", 1) for kv in args.maintenance)}
    )
    os.environ[ALLOCATOR_ENV] = args.allocator
    os.environ[NATIVE_TRACKING_ENV] = "0" if args.no_native_tracking else "1"
    if args.driver_mmap_threshold is not None:
        os.environ[DRIVER_MMAP_THRESHOLD_ENV] = str(args.driver_mmap_threshold)
    _report(measure(args))


def _report(results: dict[str, Any]) -> None:
    """soak.json, the figures (in the bench venv) and soak.md."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "soak.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    if not BENCH_PYTHON.exists():
        print(f"[soak] no plots: {BENCH_PYTHON} is missing (`make soak` installs it)",
              file=sys.stderr)  # fmt: skip
    elif subprocess.run([str(BENCH_PYTHON), "-m", "bench.plot_soak",
                         str(RESULTS / "soak.json"), str(RESULTS)],
                        cwd=RESULTS.parents[1], check=False).returncode != 0:  # fmt: skip
        print("[soak] the plots failed (see above)", file=sys.stderr)
    (RESULTS / "soak.md").write_text(markdown(results))
    print((RESULTS / "soak.md").read_text())


if __name__ == "__main__":
    main()
