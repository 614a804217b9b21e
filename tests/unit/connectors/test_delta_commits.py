"""The marked-commit search on real Delta logs (written by delta-rs): the newest version
and a batch's mark are found without listing the log folder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from eventlake.connectors.delta.commits import (
    batch_mark,
    newest_marked_batch,
    newest_version,
    orphaned_log_files,
)
from eventlake.storage import Location
from eventlake.storage.local import LocalStorage

ROW = pa.table({"x": [1]})
#: Log entries older than this are removed at a log checkpoint's cleanup.
NO_LOG_RETENTION = {"delta.logRetentionDuration": "interval 0 seconds"}


class CountingStorage(LocalStorage):
    """The local filesystem, counting folder listings and file lookups."""

    def __init__(self) -> None:
        self.listings = 0
        self.lookups = 0

    def list_names(self, location: Location) -> list[str]:
        self.listings += 1
        return super().list_names(location)

    def exists(self, location: Location) -> bool:
        self.lookups += 1
        return super().exists(location)


def _table(path: Path, commits: int, *, marks: str | None = None) -> DeltaTable:
    """A table of ``commits`` versions (0 creates it); with ``marks``, commit N > 0 is
    marked as batch N - 1 of that app."""
    write_deltalake(str(path), ROW, configuration=NO_LOG_RETENTION)
    for n in range(1, commits):
        metadata = {"userMetadata": batch_mark(marks, n - 1)} if marks else None
        write_deltalake(str(path), ROW, mode="append",
                        commit_properties=CommitProperties(custom_metadata=metadata))  # fmt: skip
    return DeltaTable(str(path))


def _newest(path: Path) -> tuple[int | None, CountingStorage]:
    storage = CountingStorage()
    return newest_version(storage, Location(path) / "_delta_log"), storage


def test_the_newest_version_is_found_with_a_few_lookups_and_no_listing(tmp_path: Path) -> None:
    table = _table(tmp_path / "t", 150)

    newest, storage = _newest(tmp_path / "t")

    assert newest == table.version() == 149
    assert storage.listings == 0
    assert storage.lookups <= 2 * math.ceil(math.log2(150)) + 2


def test_the_search_starts_at_the_last_checkpoint_and_survives_log_cleanup(
    tmp_path: Path,
) -> None:
    table = _table(tmp_path / "t", 40)
    table.create_checkpoint()
    table.cleanup_metadata()  # every commit before the checkpoint's is removed
    for _ in range(3):
        write_deltalake(str(tmp_path / "t"), ROW, mode="append")
    log = tmp_path / "t" / "_delta_log"
    assert not (log / f"{0:020d}.json").exists()

    newest, storage = _newest(tmp_path / "t")

    assert newest == DeltaTable(str(tmp_path / "t")).version() == 42
    assert storage.listings == 0
    assert storage.lookups <= 6  # from version 39: 40, 41, 42 exist, 43 does not


@pytest.mark.parametrize("broken", ["missing commit", "not json"])
def test_a_log_that_breaks_the_rules_is_listed_instead(tmp_path: Path, broken: str) -> None:
    table = _table(tmp_path / "t", 12)
    table.create_checkpoint()
    log = tmp_path / "t" / "_delta_log"
    if broken == "missing commit":
        (log / f"{11:020d}.json").unlink()  # the checkpoint's own commit, gone by hand
    else:
        (log / "_last_checkpoint").write_text("{")

    newest, storage = _newest(tmp_path / "t")

    assert newest == (10 if broken == "missing commit" else 11)
    assert storage.listings == (1 if broken == "missing commit" else 0)


def test_no_log_has_no_version(tmp_path: Path) -> None:
    (tmp_path / "_delta_log").mkdir()
    assert _newest(tmp_path)[0] is None


def test_a_batch_mark_is_found_after_a_checkpoint_and_cleanup(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, 30, marks="flow/app")
    table.create_checkpoint()
    table.cleanup_metadata()
    txn = CommitProperties(app_transactions=[Transaction(app_id="old/app", version=77)])
    write_deltalake(str(path), ROW, mode="append", commit_properties=txn)
    write_deltalake(str(path), ROW, mode="append")  # a commit of another writer

    assert newest_marked_batch(Location(path), ["flow/app"], since_ms=0) == 28
    assert newest_marked_batch(Location(path), ["old/app", "flow/app"], since_ms=0) == 77
    # The commits before ``since_ms`` are not searched.
    newest = json.loads((path / "_delta_log" / f"{31:020d}.json").read_text().splitlines()[0])
    later = newest["commitInfo"]["timestamp"] + 1
    assert newest_marked_batch(Location(path), ["flow/app"], since_ms=later) is None
    assert newest_marked_batch(Location(path), ["nobody"], since_ms=0) is None


def test_leftovers_are_only_files_of_versions_before_the_oldest_commit() -> None:
    def v(n: int) -> str:
        return f"{n:020d}"

    names = [
        *(f"{v(n)}.crc" for n in range(3)),
        *(f".{v(n)}.json.crc" for n in range(3)),
        *(f".{v(n)}.crc.crc" for n in range(3)),
        f"{v(2)}.checkpoint.parquet",  # a checkpoint, and its checksum while it is there
        f".{v(2)}.checkpoint.parquet.crc",
        f".{v(1)}.checkpoint.parquet.crc",  # of a checkpoint removed
        *(f"{v(n)}.{kind}" for n in (3, 4) for kind in ("json", "crc")),
        *(f".{v(n)}.{kind}.crc" for n in (3, 4) for kind in ("json", "crc")),
        f".{v(5)}.json.3f2a.tmp",  # a commit being written, and its checksum
        f"..{v(5)}.json.3f2a.tmp.crc",
        "_last_checkpoint",
        "._last_checkpoint.crc",
        "_staged_commits",
    ]
    orphans = set(orphaned_log_files(names))
    assert orphans == {
        *(f"{v(n)}.crc" for n in range(3)),
        *(f".{v(n)}.json.crc" for n in range(3)),
        *(f".{v(n)}.crc.crc" for n in range(3)),
        f".{v(1)}.checkpoint.parquet.crc",
    }
    assert orphaned_log_files([f"{v(0)}.crc", "_last_checkpoint"]) == []  # no commit: unknown
