"""What the soak records to tell a pause of the driver JVM from a stall of the machine: the
JVM's safepoint log, read back, and the driver's late wake-ups."""

from __future__ import annotations

import ctypes
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

from bench.soak import StallWatch, pauses, safepoint_option, safepoints
from eventlake.class_archive import java_binary

GC_TWICE = """
public class Gc {
    public static void main(String[] args) { System.gc(); System.gc(); }
}
"""


def test_a_real_jvms_safepoints_are_read_back_with_their_minute(tmp_path: Path) -> None:
    source, log = tmp_path / "Gc.java", tmp_path / "jvm-safepoints.log"
    source.write_text(GC_TWICE)
    java = java_binary()
    assert java is not None  # make test's JDK
    since = time.time()
    subprocess.run([java, safepoint_option(log), str(source)], check=True, timeout=60)
    found = safepoints(log, since, time.time())
    full = [p for p in found["longest"] if "Full" in p["operation"]]
    assert len(full) >= 2  # each System.gc() is a full collection at a safepoint
    assert all(p["seconds"] > 0 and p["minute"] == 1 and p["at"] >= since for p in full)
    assert found["count"] >= 2
    assert found["seconds"] >= sum(p["seconds"] for p in full) - 0.001  # rounding
    assert safepoints(log, time.time(), time.time() + 60)["count"] == 0  # none after it
    assert safepoints(log, since - 60, since)["count"] == 0  # nor before


def test_rotated_files_are_read_and_the_longest_come_first(tmp_path: Path) -> None:
    def line(at: str, op: str, ns: int) -> str:
        return (f'[2026-12-04T{at}+0000][1.0s] Safepoint "{op}", Time since last: 1 ns, '
                f"Reaching safepoint: 1 ns, At safepoint: 1 ns, Total: {ns} ns\n")  # fmt: skip

    log = tmp_path / "jvm-safepoints.log"
    (tmp_path / "jvm-safepoints.log.0").write_text(line("10:00:30.000", "Cleanup", 2_000_000))
    log.write_text(line("10:01:40.000", "G1CollectForAllocation", 26_000_000_000)
                   + "[2026-12-04T10:01:41.000+0000][2.0s] something else\n")  # fmt: skip
    since = datetime(2026, 12, 4, 10, 0, tzinfo=timezone.utc).timestamp()
    assert safepoints(log, since, since + 60)["count"] == 1  # the first minute's only
    found = safepoints(log, since, since + 120)
    assert found["count"] == 2
    assert found["seconds"] == 26.002
    first = found["longest"][0]
    # Logged at its end: it began 26 s before 10:01:40, in the second sample minute.
    assert (first["operation"], first["seconds"], first["minute"]) == (
        "G1CollectForAllocation",
        26.0,
        2,
    )
    lines = pauses({"safepoints": found, "driver_stalls": []})
    assert lines[0].startswith(
        "\nThe driver JVM's safepoints (its GC pauses among them): 2, 26.0 s"
    )
    assert (
        "longest 26.000 s (G1CollectForAllocation, minute 2), 0.002 s (Cleanup, minute 1)"
        in lines[0]
    )
    assert "never woke" in lines[1]


def test_the_watch_records_a_driver_held_up() -> None:
    watch = StallWatch(time.time())
    watch.start()
    time.sleep(0.5)
    ctypes.PyDLL(None).sleep(2)  # libc's sleep with the interpreter's lock held
    watch.done.set()
    watch.join()
    assert len(watch.stalls) == 1
    assert 1.0 <= watch.stalls[0]["seconds"] < 2.5
    assert watch.stalls[0]["minute"] == 1
