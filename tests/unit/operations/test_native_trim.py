"""The driver's C heap trimmed while a run lasts, on this process's real glibc."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from eventlake.allocator import limit_arenas
from eventlake.operations.native_trim import TRIM_THREAD, NativeTrim, malloc_trim
from eventlake.testing import wait_until

#: A process whose thread writes and frees 25 MiB of blocks under glibc's mmap threshold
#: (so they come from an arena) below one block it keeps (so the free does not shrink the
#: heap from its top), with glibc's arenas limited as a run limits them (argv[1]; 0: glibc's
#: default, the thread's own arena); then the service trims. Prints RssAnon before the
#: blocks, while glibc holds them freed, and once the service gave them back (or not).
TRIMMED = """
import json, sys, threading
from eventlake.allocator import limit_arenas
from eventlake.operations.native_trim import NativeTrim
from eventlake.testing import resident_bytes, wait_until

limit_arenas(int(sys.argv[1]))
BLOCK, BLOCKS = 64 * 1024, 400
kept = []

def freed_below_a_kept_block():
    blocks = [bytearray(BLOCK) for _ in range(BLOCKS)]  # zeroed: every page touched
    kept.append(bytearray(BLOCK))
    del blocks

anon = lambda: resident_bytes(field="RssAnon")
before = anon()
worker = threading.Thread(target=freed_below_a_kept_block)
worker.start()
worker.join()
held = anon()
trim = NativeTrim(0.05)
trim.start()
wait_until(lambda: trim.trims >= 1, timeout=10)
try:
    wait_until(lambda: held - anon() > 20 * 2**20, timeout=10)
except Exception:
    pass
after = anon()
trim.close()
stopped_at = trim.trims
threading.Event().wait(0.2)
intact = kept[0] == bytearray(BLOCK)
print(json.dumps({"before": before, "held": held, "after": after, "intact": intact,
                  "trims_after_close": trim.trims - stopped_at}))
"""


@pytest.mark.parametrize("arenas", [1, 0], ids=["one arena, as a run", "an arena per thread"])
def test_the_service_gives_the_freed_heap_back_while_it_runs(arenas: int) -> None:
    assert malloc_trim() is not None, "this test runs on glibc"
    done = subprocess.run([sys.executable, "-c", TRIMMED, str(arenas)], capture_output=True,
                          text=True, timeout=60, check=True)  # fmt: skip
    seen = json.loads(done.stdout)
    assert seen["held"] - seen["before"] > 20 * 2**20, seen  # glibc held the freed 25 MiB
    assert seen["held"] - seen["after"] > 20 * 2**20, seen  # and the trims gave it back
    assert seen["intact"]  # the kept block is intact
    assert seen["trims_after_close"] == 0  # closed: no more trims


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
from eventlake.allocator import limit_arenas
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
