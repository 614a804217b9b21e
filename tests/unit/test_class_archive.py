"""The class-data archive's name follows what it was built from, and only an archive that
is there is given to the JVM; stale ones are pruned."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from eventlake.class_archive import UNUSED_FOR, archive_options, archive_path, prune


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "eventlake" / "class-archives"


def test_the_name_follows_the_jars_and_only_an_archive_there_is_used(
    cache: Path, tmp_path: Path
) -> None:
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"one")
    first = archive_path([jar])
    assert first is not None
    assert first.parent == cache
    assert archive_path([jar]) == first  # the same inputs: the same archive
    assert archive_options([jar]) is None  # not built yet
    cache.mkdir(parents=True)
    first.write_bytes(b"archive")
    assert archive_options([jar]) == f"-XX:SharedArchiveFile={first} -Xshare:auto"
    jar.write_bytes(b"changed")  # another size: another archive, not built yet
    assert archive_path([jar]) != first
    assert archive_options([jar]) is None


def test_building_one_prunes_the_archives_unused_for_a_week(cache: Path) -> None:
    cache.mkdir(parents=True)
    keep, recent, stale = (cache / f"driver-{n}.jsa" for n in ("keep", "recent", "stale"))
    for path in (keep, recent, stale):
        path.write_bytes(b"x")
    old = time.time() - UNUSED_FOR - 60
    os.utime(stale, (old, old))
    assert prune(keep) == [stale]
    assert sorted(p.name for p in cache.iterdir()) == ["driver-keep.jsa", "driver-recent.jsa"]
