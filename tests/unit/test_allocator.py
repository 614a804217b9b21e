from __future__ import annotations

import json
import subprocess
import sys

import pytest

from eventlake import allocator
from eventlake.allocator import archive_compatible, fix_mmap_threshold, preload
from eventlake.errors import ErrorCode, EventlakeError


def test_the_system_allocator_preloads_nothing() -> None:
    assert preload("system", {"LD_PRELOAD": "libother.so"}) is None


def test_jemalloc_goes_ahead_of_what_is_preloaded_already() -> None:
    library = allocator.jemalloc_library()
    assert library is not None  # make test installs libjemalloc2
    assert "jemalloc" in library
    assert preload("jemalloc", {}) == library
    assert preload("jemalloc", {"LD_PRELOAD": "libother.so"}) == f"{library} libother.so"


def test_a_missing_jemalloc_is_a_coded_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "jemalloc_library", lambda: None)
    with pytest.raises(EventlakeError) as raised:
        preload("jemalloc", {})
    assert raised.value.code == ErrorCode.ALLOCATOR_MISSING
    assert "libjemalloc2" in (raised.value.fix or "")
    assert "spark.allocator" in (raised.value.fix or "")


def test_jemalloc_with_native_memory_tracking_maps_no_class_archive() -> None:
    nmt = "-XX:NativeMemoryTracking=summary -Xmx2g"
    assert archive_compatible("system", nmt)
    assert archive_compatible("jemalloc", "-Xmx2g")
    assert not archive_compatible("jemalloc", nmt)


#: A process (glibc's mmap threshold fixed at argv[1] bytes, or glibc's own with 0) that
#: frees one 4 MiB block (which raises glibc's own threshold to 4 MiB), then writes and
#: frees 64 blocks of 1 MiB below one it keeps; prints RssAnon before and after the free.
FREED_BLOCKS = """
import json, sys
from eventlake.allocator import fix_mmap_threshold
from eventlake.testing import resident_bytes

assert fix_mmap_threshold(int(sys.argv[1]))
MIB = 2**20
big = bytearray(4 * MIB)
del big
anon = lambda: resident_bytes(field="RssAnon")
before = anon()
blocks = [bytearray(MIB) for _ in range(64)]  # zeroed: every page touched
kept = bytearray(MIB)
written = anon()
del blocks
print(json.dumps({"before": before, "written": written, "freed": anon()}))
"""


def _freed_blocks(threshold: int) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-c", FREED_BLOCKS, str(threshold)],
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return json.loads(done.stdout)


def test_a_fixed_mmap_threshold_gives_freed_large_blocks_back() -> None:
    mib = 2**20
    own = _freed_blocks(0)  # glibc's own threshold rose to 4 MiB: the blocks are the arena's
    assert own["written"] - own["before"] > 60 * mib, own
    assert own["written"] - own["freed"] < 8 * mib, own  # freed, but kept resident
    fixed = _freed_blocks(128 * 1024)  # each block mapped on its own, unmapped when freed
    assert fixed["written"] - fixed["before"] > 60 * mib, fixed
    assert fixed["written"] - fixed["freed"] > 60 * mib, fixed


def test_a_threshold_of_zero_leaves_glibc_alone() -> None:
    assert fix_mmap_threshold(0)
