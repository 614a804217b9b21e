"""Storage by location: local folders and Hadoop filesystems behind one small API."""

from __future__ import annotations

from eventlake.storage.base import Location, Storage
from eventlake.storage.local import LocalStorage

__all__ = ["Location", "Storage", "filesystem"]

_LOCAL = LocalStorage()


def filesystem(location: Location) -> Storage:
    """The storage that reads and writes ``location`` (a URI needs a running Spark session:
    the storage uses that session's JVM and Hadoop configuration)."""
    if location.is_local:
        return _LOCAL
    from eventlake.storage.hadoop import HadoopStorage, spark_context

    return HadoopStorage(spark_context())
