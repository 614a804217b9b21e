"""The driver JVM on jemalloc (``spark.allocator: jemalloc``): preloaded into the JVM, not
the driver's Python process, a pipeline's rows written as on the system's malloc, and the
JVM starting with its native memory tracked too (JDK 17 stops at its start with both and a
class-data archive)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.integration.own_process_run import run_copy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

#: What the run's JVM and its own process have mapped, and how the JVM tracks memory.
MAPPED = """
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
pid = int(jvm.java.lang.ProcessHandle.current().pid())
print(json.dumps({
    "jvm_maps": Path(f"/proc/{pid}/maps").read_text(),
    "own_maps": Path("/proc/self/maps").read_text(),
    "ld_preload": os.environ.get("LD_PRELOAD"),
    "tracking": bean.getVMOption("NativeMemoryTracking").getValue(),
}))
"""


def test_jemalloc_is_the_driver_jvms_allocator_not_the_drivers_python(tmp_path: Path) -> None:
    conf = {"spark.driver.extraJavaOptions": "-XX:NativeMemoryTracking=summary"}
    spark = {"master": "local[1]", "allocator": "jemalloc", "conf": conf}
    seen = run_copy(tmp_path, spark, "available-now", MAPPED, ["r-1", "r-2"])
    assert "libjemalloc.so" in seen["jvm_maps"]
    assert "libjemalloc.so" not in seen["own_maps"]  # the Python driver keeps glibc's
    assert seen["ld_preload"] is None  # nor do the processes it starts after the JVM
    assert seen["tracking"] == "summary"


def test_the_system_allocator_is_the_default(spark: SparkSession) -> None:
    jvm = spark._jvm
    assert jvm is not None
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    assert "libjemalloc.so" not in Path(f"/proc/{pid}/maps").read_text()
