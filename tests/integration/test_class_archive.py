"""The driver JVM's class-data archive: `eventlake jars fetch` records it, a new driver
JVM maps Spark's and Delta's classes from it, and a run without it (switched off, or a
damaged file) still starts, loading them from the jars."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eventlake.class_archive import archive_path
from eventlake.jars import cache_dir
from eventlake.jvm_code import own_jar, spark_jars
from tests.integration.cli_helpers import run_cli

pytestmark = pytest.mark.integration

#: A fresh driver JVM that logs where each class came from, then creates a Delta table.
SESSION = """
import sys
from pathlib import Path
from eventlake.config.loader import settings_from_dict
from eventlake.connectors.delta.tables import ensure_delta_table
from eventlake.session import get_spark

root, archive = Path(sys.argv[1]), sys.argv[2] == "on"
settings = settings_from_dict({
    "lake": {"root": str(root / "lake")}, "checkpoints": {"root": str(root / "ck")},
    "spark": {"master": "local[1]", "class_archive": archive, "conf": {
        "spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={root / 'classes.txt'}"}},
})
spark = get_spark(settings)
ensure_delta_table(spark, root / "lake" / "t", "id STRING")
print(spark.read.format("delta").load(str(root / "lake" / "t")).count())
"""


def _class_sources(root: Path, env: dict[str, str], archive: str) -> dict[str, str]:
    """Run :data:`SESSION` in a new process; where its JVM loaded each class from."""
    root.mkdir()
    done = subprocess.run([sys.executable, "-c", SESSION, str(root), archive], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("0")  # the table it created, read back empty
    sources: dict[str, str] = {}
    for line in (root / "classes.txt").read_text().splitlines():
        # "[0.012s][info][class,load] java.lang.Object source: shared objects file"
        head, _, source = line.partition(" source: ")
        sources[head.rsplit(" ", 1)[-1]] = source
    return sources


def test_jars_fetch_records_the_archive_and_a_driver_maps_it(tmp_path: Path) -> None:
    # Built here unless `make jars` (the same command) built it for these jars already.
    fetched = run_cli("jars", "fetch", "--set", "spark")
    assert fetched.returncode == 0, fetched.stderr
    archive = archive_path(spark_jars())
    assert archive is not None
    assert f"class archive: {archive} (" in fetched.stdout
    assert f"eventlake's own classes: {own_jar()}" in fetched.stdout
    assert archive.stat().st_size > 50_000_000
    again = run_cli("jars", "fetch", "--set", "spark")
    assert again.stdout.splitlines()[-1].endswith("already there)")
    assert str(archive) in run_cli("version").stdout

    # Spark's and Delta's classes (Delta's from a jar eventlake gives Spark) come mapped
    # from the archive's top layer, the JDK's from the JDK's own base archive.
    mapped = _class_sources(tmp_path / "on", dict(os.environ), "on")
    for cls in ("org.apache.spark.SparkContext", "org.apache.spark.sql.delta.DeltaLog",
                "org.apache.spark.sql.delta.commands.CreateDeltaTableCommand"):  # fmt: skip
        assert mapped[cls] == "shared objects file (top)", (cls, mapped.get(cls))

    # Switched off: the same classes are read from their jars.
    unmapped = _class_sources(tmp_path / "off", dict(os.environ), "off")
    assert unmapped["org.apache.spark.sql.delta.DeltaLog"].endswith(".jar")
    assert "(top)" not in " ".join(unmapped.values())

    # A damaged archive of the same name (in a cache of its own): the JVM refuses it and
    # starts from the jars.
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "EVENTLAKE_JARS_DIR": str(cache_dir())}  # fmt: skip
    damaged_file = tmp_path / "cache" / "eventlake" / "class-archives" / archive.name
    damaged_file.parent.mkdir(parents=True)
    damaged_file.write_bytes(b"not an archive" * 1000)
    damaged = _class_sources(tmp_path / "damaged", env, "on")
    assert damaged["org.apache.spark.sql.delta.DeltaLog"].endswith(".jar")
