"""The driver JVM's collector follows the run: Parallel (throughput) for a run whose flows
all end, G1 (short pauses) for one that lasts; a collector the user names wins. Under G1
with a local master, tasks' memory pages stay below G1's humongous size; ``System.gc()``
(Spark's periodic clean-up) is a concurrent cycle there, not a full collection, and G1
marks the old generation at a fixed share of the heap. A run that ends compiles with
twice HotSpot's JIT thresholds; a lasting one keeps HotSpot's."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from eventlake.testing import wait_until
from tests.integration.own_process_run import run_copy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

#: The collectors of the run's JVM.
COLLECTORS = """
beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
print(json.dumps(sorted(b.getName() for b in beans)))
Path(sys.argv[1], "pages.json").write_text(
    json.dumps(jvm.org.apache.spark.SparkEnv.get().memoryManager().pageSizeBytes())
)
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
)
scaling = bean.getVMOption("CompileThresholdScaling")
Path(sys.argv[1], "jit.json").write_text(
    json.dumps([float(scaling.getValue()), str(scaling.getOrigin())])
)
"""


def _collectors(tmp_path: Path, trigger: str, conf: dict[str, str]) -> list[str]:
    spark = {"master": "local[1]", "conf": conf}
    names: list[str] = run_copy(tmp_path, spark, trigger, COLLECTORS, ["r-1"])
    return names


def _diagnostics(spark: SparkSession) -> Any:
    """The session's JVM's HotSpotDiagnosticMXBean (its options as the JVM runs them)."""
    jvm = spark._jvm
    assert jvm is not None
    return jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )


def _region_bytes(spark: SparkSession) -> int:
    """The driver JVM's G1 region: an object of half of it or more is humongous."""
    return int(_diagnostics(spark).getVMOption("G1HeapRegionSize").getValue())


def test_a_run_whose_flows_end_collects_with_parallel_and_compiles_later(
    tmp_path: Path,
) -> None:
    assert _collectors(tmp_path, "available-now", {}) == ["PS MarkSweep", "PS Scavenge"]
    # Spark's own page size there (the execution pool / cores / 16, at least 1 MiB).
    pages = json.loads((tmp_path / "pages.json").read_text())
    assert pages >= 1024 * 1024
    # Given on the JVM's command line: twice HotSpot's thresholds.
    assert json.loads((tmp_path / "jit.json").read_text()) == [2.0, "VM_CREATION"]


def test_a_collector_and_jit_thresholds_the_user_names_win(tmp_path: Path) -> None:
    options = "-XX:+UseSerialGC -XX:CompileThresholdScaling=0.5"
    conf = {"spark.driver.extraJavaOptions": options}
    assert _collectors(tmp_path, "available-now", conf) == ["Copy", "MarkSweepCompact"]
    assert json.loads((tmp_path / "jit.json").read_text()) == [0.5, "VM_CREATION"]


def test_a_session_for_a_run_that_lasts_collects_with_g1(spark: SparkSession) -> None:
    # The tests' session is started as any session not for an ending run.
    jvm = spark._jvm
    assert jvm is not None
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = sorted(b.getName() for b in beans)
    assert "G1 Young Generation" in names


def test_a_session_for_a_run_that_lasts_keeps_hotspots_jit_thresholds(
    spark: SparkSession,
) -> None:
    scaling = _diagnostics(spark).getVMOption("CompileThresholdScaling")
    assert float(scaling.getValue()) == 1.0
    assert str(scaling.getOrigin()) == "DEFAULT"


def test_a_lasting_local_session_keeps_task_pages_below_g1s_humongous_size(
    spark: SparkSession,
) -> None:
    jvm = spark._jvm
    assert jvm is not None
    region = _region_bytes(spark)
    pages = jvm.org.apache.spark.SparkEnv.get().memoryManager().pageSizeBytes()
    # An object of half a region or more is humongous: allocated in the old generation.
    assert 0 < pages < region // 2


def test_a_lasting_local_session_broadcasts_in_pieces_below_g1s_humongous_size(
    spark: SparkSession,
) -> None:
    # Spark serializes a broadcast into buffers of a whole piece: a piece of half a region
    # or more is a humongous buffer at every broadcast (each stage's tasks are one).
    jvm = spark._jvm
    assert jvm is not None
    region = _region_bytes(spark)
    value = random.randbytes(3 * 1024 * 1024)  # incompressible
    broadcast = spark.sparkContext.broadcast(value)
    try:
        assert spark.sparkContext.parallelize([0], 1).map(
            lambda _: len(broadcast.value)
        ).sum() == len(value)
        manager = jvm.org.apache.spark.SparkEnv.get().blockManager()
        pieces: list[int] = []
        while True:
            block = jvm.org.apache.spark.storage.BroadcastBlockId(
                broadcast._jbroadcast.id(), f"piece{len(pieces)}"
            )
            status = manager.getStatus(block)
            if not status.isDefined():
                break
            pieces.append(status.get().memSize() + status.get().diskSize())
        assert sum(pieces) >= len(value)
        assert len(pieces) > 1
        assert max(pieces) < region // 2
    finally:
        broadcast.destroy()


def test_system_gc_in_a_lasting_session_clears_weak_references_without_a_full_collection(
    spark: SparkSession,
) -> None:
    # What Spark's ContextCleaner needs of its periodic System.gc(): the weak references to
    # what the driver dropped are cleared. On G1 a full collection is counted by its
    # "G1 Old Generation" bean; a concurrent cycle is not.
    jvm = spark._jvm
    assert jvm is not None
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    full = next(b for b in beans if b.getName() == "G1 Old Generation")
    weak = jvm.java.util.WeakHashMap()
    weak.put(f"key-{time.time_ns()}", 1)  # a String made in the JVM, held only by the map
    assert weak.size() == 1
    before = full.getCollectionCount()

    def collected() -> bool:
        jvm.java.lang.System.gc()
        return bool(weak.size() == 0)

    wait_until(collected, what="a weakly held key collected by System.gc()")
    assert full.getCollectionCount() == before


def test_a_lasting_session_marks_the_old_generation_at_a_fixed_share_of_the_heap(
    spark: SparkSession,
) -> None:
    bean = _diagnostics(spark)
    adaptive = bean.getVMOption("G1UseAdaptiveIHOP")
    assert adaptive.getValue() == "false"
    assert str(adaptive.getOrigin()) == "VM_CREATION"  # given on the JVM's command line
    assert int(bean.getVMOption("InitiatingHeapOccupancyPercent").getValue()) == 45
