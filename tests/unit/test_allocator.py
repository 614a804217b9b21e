from __future__ import annotations

import pytest

from eventlake import allocator
from eventlake.allocator import archive_compatible, preload
from eventlake.errors import ErrorCode, EventlakeError


def test_the_system_allocator_preloads_nothing() -> None:
    assert preload("system", {"LD_PRELOAD": "libother.so"}) is None


@pytest.mark.parametrize(
    ("name", "file"), [("jemalloc", "libjemalloc.so.2"), ("tcmalloc", "libtcmalloc_minimal.so.4")]
)
def test_an_allocator_goes_ahead_of_what_is_preloaded_already(name: str, file: str) -> None:
    assert allocator.library(name) == file  # make test installs both
    assert preload(name, {}) == file
    assert preload(name, {"LD_PRELOAD": "libother.so"}) == f"{file} libother.so"


@pytest.mark.parametrize(
    ("name", "package"), [("jemalloc", "libjemalloc2"), ("tcmalloc", "libtcmalloc-minimal4")]
)
def test_a_missing_allocator_is_a_coded_error_naming_its_package(
    monkeypatch: pytest.MonkeyPatch, name: str, package: str
) -> None:
    monkeypatch.setattr(allocator, "library", lambda _: None)
    with pytest.raises(EventlakeError) as raised:
        preload(name, {})
    assert raised.value.code == ErrorCode.ALLOCATOR_MISSING
    assert package in str(raised.value)
    assert "spark.allocator" in (raised.value.fix or "")


def test_jemalloc_with_native_memory_tracking_maps_no_class_archive() -> None:
    nmt = "-XX:NativeMemoryTracking=summary -Xmx2g"
    assert archive_compatible("system", nmt)
    assert archive_compatible("jemalloc", "-Xmx2g")
    assert not archive_compatible("jemalloc", nmt)
