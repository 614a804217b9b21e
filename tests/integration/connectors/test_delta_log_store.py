"""eventlake's log store for local Delta tables (``ListByNameLogStore``): the session uses
it, and it lists exactly what Delta's own store lists, on real logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from eventlake.session import LOCAL_LOG_STORE
from eventlake.testing import read_delta

pytestmark = pytest.mark.integration

DELTAS_STORE = "io.delta.storage.HDFSLogStore"


def _listing(store: Any, jvm: Any, path: str, conf: Any) -> list[tuple[str, int, bool, int]]:
    found = store.listFrom(jvm.org.apache.hadoop.fs.Path(path), conf)
    rows = []
    while found.hasNext():
        f = found.next()
        rows.append((str(f.getPath()), f.getLen(), f.isDirectory(), f.getModificationTime()))
    return rows


def test_the_session_lists_local_logs_with_eventlakes_store(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    for i in range(3):
        spark.range(i, i + 1).write.format("delta").mode("append").save(str(table))
    delta_log = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, str(table)
    )
    delegate = delta_log.store().getDelegate(delta_log.logPath())
    assert delegate.logStoreImpl().getClass().getName() == LOCAL_LOG_STORE
    assert sorted(r["id"] for r in read_delta(table).to_pylist()) == [0, 1, 2]
    assert spark.read.format("delta").load(str(table)).count() == 3


@pytest.mark.parametrize("raw", [False, True], ids=["checksummed", "raw"])
def test_it_lists_what_deltas_store_lists(spark: SparkSession, tmp_path: Path, raw: bool) -> None:
    jvm = spark._jvm
    table = tmp_path / "t"
    for i in range(12):
        spark.range(i, i + 1).write.format("delta").mode("append").save(str(table))
    log = table / "_delta_log"
    # What else a local log folder can hold: Hadoop's hidden checksums, a commit's temp
    # file, a folder, Delta's own files.
    (log / ".00000000000000000003.json.crc").write_bytes(b"crc")
    (log / ".00000000000000000012.json.0f1e.tmp").write_text("{}")
    (log / "_commits").mkdir()
    (log / "00000000000000000011.json:odd").write_text("{}")
    conf = spark._jsc.hadoopConfiguration()
    if raw:
        conf = jvm.org.apache.hadoop.conf.Configuration(conf)
        conf.set("fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
        conf.setBoolean("fs.file.impl.disable.cache", True)
    ours_store = jvm.eventlake.delta.ListByNameLogStore(conf)
    deltas_store = jvm.io.delta.storage.HDFSLogStore(conf)
    prefixes = ["00000000000000000000.", "00000000000000000007.", "00000000000000000011.",
                "00000000000000000099.", "_", ".", ""]  # fmt: skip
    for prefix in prefixes:
        path = f"file:{log}/{prefix}" if prefix else f"file:{log}/"
        expected = _listing(deltas_store, jvm, path, conf)
        assert _listing(ours_store, jvm, path, conf) == expected, prefix
    hidden = [Path(p).name for p, *_ in _listing(ours_store, jvm, f"file:{log}/.", conf)]
    # Hadoop's checksummed local filesystem hides its checksums; the raw one has none to hide.
    assert (".00000000000000000003.json.crc" in hidden) == raw
    assert ".00000000000000000012.json.0f1e.tmp" in hidden
    seven = [Path(p).name for p, *_ in _listing(ours_store, jvm, f"file:{log}/"
                                                 "00000000000000000007.", conf)]  # fmt: skip
    assert seven[:2] == ["00000000000000000007.crc", "00000000000000000007.json"]
    assert "_commits" in seven
    assert "00000000000000000011.json:odd" in seven
    assert not any(name.startswith(".") for name in seven)
    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        _listing(ours_store, jvm, f"file:{tmp_path}/none/_delta_log/0.", conf)
