"""The driver JVM's C allocator (``spark.allocator``).

The JVM's native memory (its compilers' arenas, RocksDB's memtables and blocks, the
compression codecs' buffers) comes from the C library's ``malloc``, and glibc keeps much of
what the JVM frees resident: the soak's JVM grew on glibc, while on jemalloc what it held
through malloc stayed flat. ``jemalloc`` starts the driver JVM (and so the Python workers it
starts) with jemalloc preloaded (``LD_PRELOAD``), which hands freed pages back on its own,
as Flink's images do for their JVMs; the driver's own Python process keeps the C library's.
``tcmalloc`` preloads gperftools' tcmalloc the same way. The library is the system's
(:data:`LIBRARIES`).
"""

from __future__ import annotations

import ctypes.util
from collections.abc import Mapping
from typing import NamedTuple

from eventlake.errors import ErrorCode, EventlakeError

SYSTEM = "system"


class Library(NamedTuple):
    """Where an allocator comes from: the name the dynamic linker finds it by, and the
    packages that install it."""

    name: str
    debian: str
    fedora: str


#: The allocators ``spark.allocator`` can preload, by name.
LIBRARIES = {
    "jemalloc": Library("jemalloc", "libjemalloc2", "jemalloc"),
    "tcmalloc": Library("tcmalloc_minimal", "libtcmalloc-minimal4", "gperftools-libs"),
}

#: With jemalloc preloaded, JDK 17 stopped at its start when it tracked its native memory
#: (this option) and mapped a class-data archive too: no archive then, for any preload.
NATIVE_MEMORY_TRACKING = "-XX:NativeMemoryTracking="


def library(allocator: str) -> str | None:
    """The file the dynamic linker finds ``allocator`` by (``libjemalloc.so.2``), or None."""
    return ctypes.util.find_library(LIBRARIES[allocator].name)


def preload(allocator: str, environ: Mapping[str, str]) -> str | None:
    """The driver JVM's ``LD_PRELOAD`` for ``allocator``: None for the system's malloc,
    else the allocator's library ahead of what ``environ`` preloads already.

    Raises EL-JAVA-002 when the allocator's library is not installed."""
    if allocator == SYSTEM:
        return None
    found = library(allocator)
    if found is None:
        packages = LIBRARIES[allocator]
        raise EventlakeError(
            ErrorCode.ALLOCATOR_MISSING,
            f"spark.allocator is {allocator}, but the dynamic linker finds no "
            f"lib{packages.name} (Debian and Ubuntu package {packages.debian}, Fedora and "
            f"RHEL {packages.fedora}).",
        )
    return f"{found} {environ.get('LD_PRELOAD', '')}".strip()


def archive_compatible(allocator: str, java_options: str) -> bool:
    """Whether the driver JVM can map its class-data archive under ``allocator`` with
    ``java_options``."""
    return allocator == SYSTEM or NATIVE_MEMORY_TRACKING not in java_options
