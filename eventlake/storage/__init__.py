"""Storage by location: local folders and Hadoop filesystems behind one small API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventlake.storage.base import Location, Storage
from eventlake.storage.local import LocalStorage

if TYPE_CHECKING:
    from eventlake.storage.hadoop import HadoopStorage

__all__ = ["Location", "Storage", "filesystem"]

_LOCAL = LocalStorage()
#: One per SparkContext: it holds that context's JVM and Hadoop configuration.
_hadoop: list[HadoopStorage] = []


def filesystem(location: Location) -> Storage:
    """The storage that reads and writes ``location`` (a URI needs a running Spark session)."""
    if location.is_local:
        return _LOCAL
    from eventlake.storage.hadoop import HadoopStorage, spark_context

    sc = spark_context()
    if not _hadoop or _hadoop[0].context is not sc:
        _hadoop[:] = [HadoopStorage(sc)]
    return _hadoop[0]
