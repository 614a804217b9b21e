"""The driver's C heap trimmed while a run lasts, on this process's real glibc."""

from __future__ import annotations

import subprocess
import sys
import threading

from eventlake.operations.native_trim import TRIM_THREAD, NativeTrim, limit_arenas, malloc_trim
from eventlake.testing import resident_bytes, wait_until

#: Blocks under glibc's mmap threshold (128 KiB) come from an arena and stay there freed.
BLOCK = 64 * 1024
BLOCKS = 400  # 25 MiB


def _rss_anon() -> int:
    return resident_bytes(field="RssAnon")


def _freed_below_a_kept_block() -> list[bytearray]:
    """25 MiB written and freed in the C heap, under one block still in use (so a free does
    not shrink the heap from its top): resident until trimmed."""
    blocks = [bytearray(BLOCK) for _ in range(BLOCKS)]  # zeroed: every page touched
    kept = [bytearray(BLOCK)]
    del blocks
    return kept


def test_the_service_gives_the_freed_heap_back_while_it_runs() -> None:
    assert malloc_trim() is not None, "this test runs on glibc"
    # Allocated and freed on one thread, so the freed blocks are all in its arena.
    kept: list[list[bytearray]] = []
    worker = threading.Thread(target=lambda: kept.append(_freed_below_a_kept_block()))
    before = _rss_anon()
    worker.start()
    worker.join()
    held = _rss_anon()
    assert held - before > 20 * 2**20, (before, held)  # glibc held the freed 25 MiB
    trim = NativeTrim(0.05)
    trim.start()
    try:
        wait_until(lambda: trim.trims >= 1, timeout=10)
        wait_until(lambda: held - _rss_anon() > 20 * 2**20, timeout=10)
    finally:
        trim.close()
    assert kept[0][0] == bytearray(BLOCK)  # the kept block is intact
    stopped_at = trim.trims
    threading.Event().wait(0.2)
    assert trim.trims == stopped_at  # closed: no more trims


def test_an_interval_of_zero_starts_no_thread() -> None:
    calls: list[int] = []
    trim = NativeTrim(0, trim=lambda: calls.append(1))
    trim.start()
    assert not trim.active
    assert TRIM_THREAD not in {t.name for t in threading.enumerate()}
    trim.close()
    assert calls == []


def test_a_trim_that_fails_stops_trimming_and_the_run_goes_on() -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise OSError("no heap")

    trim = NativeTrim(0.02, trim=broken)
    trim.start()
    wait_until(lambda: calls, timeout=10)
    threading.Event().wait(0.2)
    trim.close()
    assert calls == [1]
    assert trim.trims == 0


#: A process whose four threads allocate at once, then glibc's count of its arenas
#: (``malloc_stats`` prints one "Arena N:" block per arena to stderr).
ARENAS = """
import ctypes, sys, threading
from eventlake.operations.native_trim import limit_arenas
assert limit_arenas(int(sys.argv[1]))
together = threading.Barrier(4)
def allocate():
    together.wait()
    kept = [bytearray(4096) for _ in range(1000)]  # larger than Python's own allocator takes
    together.wait()
threads = [threading.Thread(target=allocate) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ctypes.CDLL(None).malloc_stats()
"""


def _arenas(limit: int) -> int:
    done = subprocess.run([sys.executable, "-c", ARENAS, str(limit)], capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_one_arena_is_shared_by_every_thread_started_after() -> None:
    assert _arenas(0) >= 4  # glibc's default: an arena for each thread that allocates at once
    assert _arenas(1) == 1
    assert _arenas(2) == 2


def test_no_limit_leaves_glibc_alone() -> None:
    assert limit_arenas(0)
