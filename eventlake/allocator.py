"""The driver's C allocators: the JVM's (``spark.allocator``) and glibc's in its Python
process (its arenas, ``spark.driver_arenas``, and its mmap threshold,
``spark.driver_mmap_threshold``).

The JVM's native memory (its compilers' arenas, RocksDB's memtables and blocks, the
compression codecs' buffers) comes from the C library's ``malloc``, and glibc keeps much of
what the JVM frees resident: the soak's JVM grew on glibc, while on jemalloc what it held
through malloc stayed flat. ``jemalloc`` starts the driver JVM (and so the Python workers it
starts) with jemalloc preloaded (``LD_PRELOAD``), which hands freed pages back on its own,
as Flink's images do for their JVMs; the driver's own Python process keeps the C library's.
The library is the system's: Debian and Ubuntu's ``libjemalloc2``, Fedora and RHEL's
``jemalloc``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Mapping

from eventlake.errors import ErrorCode, EventlakeError

SYSTEM = "system"
#: With jemalloc preloaded, JDK 17 stops at its start when it tracks its native memory
#: (this option) and maps a class-data archive too.
NATIVE_MEMORY_TRACKING = "-XX:NativeMemoryTracking="


def jemalloc_library() -> str | None:
    """The name the dynamic linker finds jemalloc by (``libjemalloc.so.2``), or None."""
    return ctypes.util.find_library("jemalloc")


def preload(allocator: str, environ: Mapping[str, str]) -> str | None:
    """The driver JVM's ``LD_PRELOAD`` for ``allocator``: None for the system's malloc,
    else the allocator's library ahead of what ``environ`` preloads already.

    Raises EL-JAVA-002 when the allocator's library is not installed."""
    if allocator == SYSTEM:
        return None
    library = jemalloc_library()
    if library is None:
        raise EventlakeError(
            ErrorCode.ALLOCATOR_MISSING,
            f"spark.allocator is {allocator}, but the dynamic linker finds no libjemalloc.",
        )
    return f"{library} {environ.get('LD_PRELOAD', '')}".strip()


def archive_compatible(allocator: str, java_options: str) -> bool:
    """Whether the driver JVM can map its class-data archive under ``allocator`` with
    ``java_options``."""
    return allocator == SYSTEM or NATIVE_MEMORY_TRACKING not in java_options


#: ``mallopt``'s parameters (malloc.h): the most arenas glibc makes (``M_ARENA_MAX``), and
#: the size from which a block is mapped on its own (``M_MMAP_THRESHOLD``).
M_ARENA_MAX = -8
M_MMAP_THRESHOLD = -3


def _mallopt(param: int, value: int) -> bool:
    """glibc's ``mallopt``; False where the C library has none or refuses ``value``."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(param, value))


def limit_arenas(arenas: int) -> bool:
    """At most ``arenas`` glibc arenas for this process's threads from now on (0: glibc's
    default, eight per core); False where the C library has no ``mallopt``.

    A thread's own arena keeps its free top resident (glibc trims it only past a threshold
    it raises as large blocks come and go, and ``malloc_trim`` leaves it), so over hours the
    driver's dozens of threads held more and more free memory. The threads that have an
    arena keep it: call this before the run starts its threads."""
    if arenas <= 0:
        return True
    return _mallopt(M_ARENA_MAX, arenas)


def fix_mmap_threshold(threshold: int) -> bool:
    """Blocks of ``threshold`` bytes and more mapped on their own from now on, each given
    back as it is freed (0: glibc's own threshold); False where the C library has no
    ``mallopt`` or refuses the value.

    glibc's own threshold starts at 128 KiB and rises to the size of each mapped block
    freed (up to 32 MiB), after which blocks that size come from an arena, whose free
    pages between live blocks stay resident: the driver's main arena grew by about 9 MiB
    an hour in the soak, with malloc's bytes in use flat. A fixed threshold also stops it
    rising."""
    if threshold <= 0:
        return True
    return _mallopt(M_MMAP_THRESHOLD, threshold)
