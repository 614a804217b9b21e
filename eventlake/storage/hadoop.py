"""Any Hadoop filesystem (``hdfs://``, ``s3a://``, ``abfss://``, ``gs://``...), through the
FileSystem API of the running Spark session's JVM and its Hadoop configuration (so
``spark.hadoop.*`` settings and credentials apply to eventlake's files as to Spark's)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eventlake.errors import ErrorCode, EventlakeError, jvm_causes, translate
from eventlake.storage.base import Location

_NOT_FOUND = "java.io.FileNotFoundException"


def spark_context() -> Any:
    # The process's SparkContext, not the thread's active session: listener callbacks run
    # on py4j threads that have none.
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        raise EventlakeError(
            ErrorCode.STORAGE_UNAVAILABLE,
            "eventlake reads and writes URIs of Hadoop filesystems through Spark's JVM, "
            "and no Spark session is running.",
            expected="a Spark session, started before the storage is used",
            fix="report this: the command should start Spark for a URI location",
        )
    return sc


class HadoopStorage:
    """The :class:`~eventlake.storage.base.Storage` of URIs, by Hadoop's FileSystem API."""

    def __init__(self, context: Any) -> None:
        #: The SparkContext whose JVM and Hadoop configuration it uses.
        self.context = context
        self._jvm = context._jvm
        self._conf = context._jsc.hadoopConfiguration()

    def _fs(self, location: Location) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(str(location))
        return path.getFileSystem(self._conf), path

    def _status(self, location: Location) -> Any | None:
        fs, path = self._fs(location)
        return fs.getFileStatus(path) if fs.exists(path) else None

    def exists(self, location: Location) -> bool:
        with _guard(location):
            fs, path = self._fs(location)
            return bool(fs.exists(path))

    def is_dir(self, location: Location) -> bool:
        with _guard(location):
            status = self._status(location)
            return status is not None and bool(status.isDirectory())

    def is_file(self, location: Location) -> bool:
        with _guard(location):
            status = self._status(location)
            return status is not None and bool(status.isFile())

    def list_names(self, location: Location) -> list[str]:
        with _guard(location):
            fs, path = self._fs(location)
            if not fs.exists(path):
                return []
            return sorted(str(s.getPath().getName()) for s in fs.listStatus(path))

    def read_text(self, location: Location) -> str:
        with _guard(location):
            fs, path = self._fs(location)
            stream = fs.open(path)
            try:
                data: bytes = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
            finally:
                stream.close()
            return data.decode()

    def write_text(self, location: Location, text: str) -> None:
        with _guard(location):
            fs, path = self._fs(location)
            tmp = self._jvm.org.apache.hadoop.fs.Path(
                path.getParent(), f".{location.name}.{uuid.uuid4().hex[:8]}.tmp"
            )
            out = fs.create(tmp, True)
            try:
                out.write(bytearray(text.encode()))
            finally:
                out.close()
            # Hadoop's rename never replaces a file: drop the old one first (a reader in
            # between sees none, never a partial one).
            if not fs.rename(tmp, path):
                fs.delete(path, False)
                if not fs.rename(tmp, path):
                    fs.delete(tmp, False)
                    raise OSError(f"could not write {location}")

    def mkdirs(self, location: Location) -> None:
        with _guard(location):
            fs, path = self._fs(location)
            fs.mkdirs(path)

    def copy_to_local(self, location: Location, target: Path) -> None:
        with _guard(location):
            fs, path = self._fs(location)
            target.parent.mkdir(parents=True, exist_ok=True)
            local = self._jvm.org.apache.hadoop.fs.Path(str(target.absolute()))
            # The raw local filesystem: no .crc files beside the copies.
            fs.copyToLocalFile(False, path, local, True)

    def delete(self, location: Location) -> None:
        with _guard(location):
            fs, path = self._fs(location)
            fs.delete(path, True)

    def modified(self, location: Location) -> float | None:
        with _guard(location):
            status = self._status(location)
            return None if status is None else int(status.getModificationTime()) / 1000

    def size(self, location: Location) -> int:
        with _guard(location):
            fs, path = self._fs(location)
            return int(fs.getContentSummary(path).getLength()) if fs.exists(path) else 0


@contextmanager
def _guard(location: Location) -> Iterator[None]:
    """JVM errors as Python's: a missing file is FileNotFoundError, the rest translated
    (an unreachable filesystem is EL-STORAGE-001)."""
    from py4j.protocol import Py4JJavaError

    try:
        yield
    except Py4JJavaError as exc:
        if any(c.cls == _NOT_FOUND for c in jvm_causes(exc)):
            raise FileNotFoundError(str(location)) from None
        raise translate(exc, context=f"reading or writing {location}") from exc
