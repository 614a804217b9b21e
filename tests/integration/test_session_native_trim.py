"""The driver JVM gives back the C heap it holds free: glibc keeps memory native code
frees (RocksDB, compression codecs, the JIT) resident for reuse, and over hours that
grows the process; eventlake's session starts the JVM with HotSpot's periodic trim."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from eventlake.testing import resident_bytes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

BLOCK = 64 * 2**10  # under glibc's mmap threshold (128 KiB): served from an arena
BLOCKS = 4096  # 256 MiB


def _unsafe(jvm: Any) -> Any:
    field = jvm.java.lang.Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe")
    field.setAccessible(True)
    return field.get(None)


def test_the_driver_jvm_gives_back_the_c_heap_it_holds_free(spark: SparkSession) -> None:
    jvm = spark._jvm
    assert jvm is not None
    diagnostic = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    )
    interval = int(diagnostic.getVMOption("TrimNativeHeapInterval").getValue()) / 1000
    assert interval > 0  # the default, 60 s
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    unsafe = _unsafe(jvm)
    blocks = [unsafe.allocateMemory(BLOCK) for _ in range(BLOCKS)]
    guard = unsafe.allocateMemory(BLOCK)  # above the blocks: their arena cannot shrink
    try:
        for block in blocks:
            unsafe.setMemory(block, BLOCK, 1)  # touched: resident
        for block in blocks:
            unsafe.freeMemory(block)
        held = resident_bytes(pid)  # glibc keeps the freed blocks resident
        deadline = time.monotonic() + 2 * interval + 30
        while (
            resident_bytes(pid) > held - (BLOCK * BLOCKS) * 3 // 4 and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        given_back = held - resident_bytes(pid)
    finally:
        unsafe.freeMemory(guard)
    assert given_back >= (BLOCK * BLOCKS) * 3 // 4, (
        f"the JVM gave back {given_back >> 20} MiB of {(BLOCK * BLOCKS) >> 20} MiB freed "
        f"within {2 * interval + 30:.0f} s"
    )
