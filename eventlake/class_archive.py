"""The driver JVM's class-data archive: the classes a run loads, parsed and verified once.

A cold JVM spends seconds loading Spark's, Delta's and Kafka's classes: at its start, and
again at the first Delta table, the first Kafka source, the first state store. HotSpot's
class-data sharing (a dynamic AppCDS archive, JDK 13+) maps them from one file instead:
``eventlake jars fetch`` records one (:func:`eventlake.warmup.build_class_archive`), and
every later driver JVM started with the same Java, pyspark and jars maps it.

An archive is named by what it was built from, so a new Java, pyspark or jar set names a
new one (the run goes without until ``eventlake jars fetch`` builds it). The JVM also
checks it and, with ``-Xshare:auto``, starts without it when it does not match.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from eventlake.paths import user_cache_dir

#: The folder of archives under the user's cache folder.
ARCHIVE_DIR = "class-archives"
SUFFIX = ".jsa"
#: Archives are hundreds of MB: building one removes the others unused this long (seconds).
UNUSED_FOR = 7 * 86400


def archive_dir() -> Path:
    """``$XDG_CACHE_HOME/eventlake/class-archives`` (``~/.cache`` by default)."""
    return user_cache_dir() / ARCHIVE_DIR


def java_binary() -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and Path(found).exists() else None


def _spark_home() -> Path:
    import pyspark

    home = os.environ.get("SPARK_HOME")
    return Path(home) if home else Path(pyspark.__file__).parent


def _stamp(path: Path) -> str:
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def archive_key(jars: Iterable[Path]) -> str | None:
    """What an archive depends on, hashed: the Java binary, Spark's own jars and the jars
    eventlake adds (each by path, size and modification time); None without a Java."""
    java = java_binary()
    if java is None:
        return None
    parts = [_stamp(java)]
    spark_jars = _spark_home() / "jars"
    if spark_jars.is_dir():
        parts += sorted(_stamp(p) for p in spark_jars.glob("*.jar"))
    parts += [_stamp(Path(j)) for j in jars if Path(j).exists()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(jars: Iterable[Path]) -> Path | None:
    """Where the archive for this Java, pyspark and ``jars`` is (or would be) kept."""
    key = archive_key(jars)
    return archive_dir() / f"driver-{key}{SUFFIX}" if key else None


def archive_options(jars: Iterable[Path]) -> str | None:
    """The driver JVM's options that map the archive for ``jars``; None when there is none."""
    path = archive_path(jars)
    if path is None or not path.is_file():
        return None
    return f"-XX:SharedArchiveFile={path} -Xshare:auto"


def prune(keep: Path) -> list[Path]:
    """Remove the other archives beside ``keep`` (an older Java, pyspark or jars) that no
    JVM mapped for :data:`UNUSED_FOR` (by their access time)."""
    removed = []
    now = time.time()
    for old in keep.parent.glob(f"*{SUFFIX}"):
        if old != keep and now - old.stat().st_atime > UNUSED_FOR:
            old.unlink(missing_ok=True)
            removed.append(old)
    return removed
