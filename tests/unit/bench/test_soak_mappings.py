"""Where the soak finds the driver's anonymous memory: glibc's main arena, its thread arenas
or elsewhere, read from a real process's ``/proc/PID/smaps``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: A process (glibc's arenas limited to argv[1]; 0: glibc's default) whose thread allocates
#: 25 MiB of blocks under glibc's mmap threshold and keeps them, then reads a small Delta
#: table with delta-rs; prints what :func:`bench.soak.driver_mappings` saw before, while
#: the thread holds the blocks, and after the read, with RssAnon at the same moment.
KEPT = """
import json, sys, threading
from bench.soak import driver_mappings
from eventlake.allocator import limit_arenas
from eventlake.testing import resident_bytes

limit_arenas(int(sys.argv[1]))
BLOCK, BLOCKS = 64 * 1024, 400
held, release = threading.Event(), threading.Event()
kept = []

def keep():
    kept.extend(bytearray(BLOCK) for _ in range(BLOCKS))  # zeroed: every page touched
    held.set()
    release.wait()

seen = {"before": driver_mappings()}
worker = threading.Thread(target=keep)
worker.start()
held.wait()
seen["holding"] = driver_mappings()
seen["rss_anon"] = resident_bytes(field="RssAnon")
release.set()
worker.join()

import pandas as pd
from deltalake import DeltaTable, write_deltalake
write_deltalake(sys.argv[2], pd.DataFrame({"x": [1, 2, 3]}))
assert DeltaTable(sys.argv[2]).version() == 0
seen["after_read"] = driver_mappings()
print(json.dumps(seen))
"""

MIB = 2**20


def _seen(arenas: int, table: Path) -> dict[str, dict[str, int]]:
    done = subprocess.run([sys.executable, "-c", KEPT, str(arenas), str(table)],
                          capture_output=True, text=True, timeout=120, check=True,
                          cwd=Path(__file__).parents[3])  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("arenas", [1, 0], ids=["one arena, as a run", "an arena per thread"])
def test_a_threads_blocks_are_found_in_the_arena_glibc_gave_it(arenas: int, tmp_path: Path) -> None:
    seen = _seen(arenas, tmp_path / "t")
    before, holding = seen["before"], seen["holding"]
    main = holding["driver_main_arena_bytes"] - before["driver_main_arena_bytes"]
    threads = holding["driver_thread_arenas_bytes"] - before["driver_thread_arenas_bytes"]
    # With the run's setting the thread shares the main arena; with glibc's default it got
    # an arena of its own.
    grew, other = (main, threads) if arenas == 1 else (threads, main)
    assert grew > 24 * MIB, seen
    assert other < 1 * MIB, seen
    # The three parts are the process's anonymous memory (the kernel's RssAnon, read just
    # after: within a few pages).
    parts = sum(holding[k] for k in ("driver_main_arena_bytes", "driver_thread_arenas_bytes",
                                     "driver_other_anon_bytes"))  # fmt: skip
    assert abs(parts - seen["rss_anon"]) < 2 * MIB, seen
    assert holding["driver_threads"] == before["driver_threads"] + 1
    assert before["driver_io_threads"] == 0
    # delta-rs wrote and read the table on threads of its I/O runtime, which it keeps.
    assert seen["after_read"]["driver_io_threads"] >= 1, seen
