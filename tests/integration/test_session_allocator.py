"""The driver JVM on jemalloc (``spark.allocator: jemalloc``): preloaded into the JVM, not
the driver's Python process, a pipeline's rows written as on the system's malloc, and the
JVM starting with its native memory tracked too (JDK 17 stops at its start with both and a
class-data archive)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from eventlake.testing import read_delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

#: A run of a one-flow pipeline in a process of its own; what its JVM and it have mapped.
RUN = """
import json, os, sys
from pathlib import Path
from pyspark.sql import DataFrame
from eventlake.connectors import DeltaOutput, FilesInput
from eventlake.pipelines import Pipeline
from eventlake.run import run_pipeline
from eventlake.session import get_spark
from eventlake.testing import settings_for

root = Path(sys.argv[1])
p = Pipeline("allocator")

@p.flow(name="copy", input=FilesInput("inbox", "json", "id STRING"),
        output=DeltaOutput("silver", "copy"))
def copy(ctx, df: DataFrame) -> DataFrame:
    return df

conf = {"spark.driver.extraJavaOptions": "-XX:NativeMemoryTracking=summary"}
settings = settings_for(root, spark={"master": "local[1]", "allocator": "jemalloc",
                                     "conf": conf})
run_pipeline(p, settings, trigger="available-now")
jvm = get_spark()._jvm
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
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "a.json").write_text('{"id": "r-1"}\n{"id": "r-2"}\n')
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    ran = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    seen = json.loads(ran.stdout.strip().splitlines()[-1])
    assert "libjemalloc.so" in seen["jvm_maps"]
    assert "libjemalloc.so" not in seen["own_maps"]  # the Python driver keeps glibc's
    assert seen["ld_preload"] is None  # nor do the processes it starts after the JVM
    assert seen["tracking"] == "summary"
    rows = read_delta(tmp_path / "lake" / "silver" / "copy").to_pylist()
    assert sorted(r["id"] for r in rows) == ["r-1", "r-2"]


def test_the_system_allocator_is_the_default(spark: SparkSession) -> None:
    jvm = spark._jvm
    assert jvm is not None
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    assert "libjemalloc.so" not in Path(f"/proc/{pid}/maps").read_text()
