from __future__ import annotations

import pytest

from eventlake import allocator
from eventlake.allocator import archive_compatible, preload
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
