"""The benchmarks' reading of a table's rows version by version, on tables delta-rs writes:
each append's rows at its version, nothing at a compaction."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.latency import rows_by_version
from eventlake.storage import Location


def _append(path: Path, ids: list[int]) -> None:
    write_deltalake(str(path), pa.table({"id": ids, "tag": [f"t{i}" for i in ids]}), mode="append")


def test_each_version_holds_the_rows_its_commit_appended(tmp_path: Path) -> None:
    table = tmp_path / "t"
    batches = [[1, 2], [3], [4, 5, 6], [7]]
    for ids in batches:
        _append(table, ids)
    DeltaTable(str(table)).optimize.compact()  # version 4 rewrites every row
    _append(table, [8, 9])

    rows = rows_by_version(Location(str(table)), ["id"])

    assert sorted(rows) == [0, 1, 2, 3, 4, 5]
    assert {v: sorted(r["id"] for r in rows[v]) for v in rows} == {
        0: [1, 2], 1: [3], 2: [4, 5, 6], 3: [7], 4: [], 5: [8, 9]
    }  # fmt: skip
    assert [r["id"] for v in sorted(rows) for r in rows[v]] == list(range(1, 10))


def test_the_columns_asked_for_only(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _append(table, [1])
    assert rows_by_version(Location(str(table)), ["tag"]) == {0: [{"tag": "t1"}]}
