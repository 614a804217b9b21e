"""Local files go through eventlake's ``file:`` filesystem (``InProcessLocalFileSystem``):
the same files, permissions and statuses as Hadoop's, without a process per file."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from py4j.protocol import Py4JJavaError

from eventlake.session import IN_PROCESS_FILE_CONTEXT, IN_PROCESS_FILESYSTEM
from eventlake.testing import read_delta

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration


def _processes(jvm: Any, folder: Path, work: Any) -> list[str]:
    """The command lines of the processes the JVM started while ``work()`` ran, from a
    flight recording of ``jdk.ProcessStart``."""
    recording = jvm.jdk.jfr.Recording()
    recording.enable("jdk.ProcessStart")
    recording.start()
    try:
        work()
    finally:
        recording.stop()
    dump = jvm.java.io.File(str(folder / f"processes-{os.getpid()}.jfr")).toPath()
    recording.dump(dump)
    recording.close()
    events = jvm.jdk.jfr.consumer.RecordingFile.readAllEvents(dump)
    return [str(events.get(i).getString("command")) for i in range(events.size())]


def _files(commands: list[str]) -> list[str]:
    """The commands Hadoop's local filesystem forks (other threads may fork others)."""
    return [c for c in commands if c.split()[0] in ("chmod", "readlink", "stat", "ls")]


def test_the_session_writes_local_files_in_process_as_hadoop_would(
    spark: SparkSession, tmp_path: Path
) -> None:
    jvm = spark._jvm
    assert jvm is not None
    conf = spark._jsc.hadoopConfiguration()
    hadoop = jvm.org.apache.hadoop
    ours = hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    assert ours.getClass().getName() == IN_PROCESS_FILESYSTEM
    context = hadoop.fs.FileContext.getLocalFSFileContext(conf)
    assert context.getDefaultFileSystem().getClass().getName() == IN_PROCESS_FILE_CONTEXT
    theirs = hadoop.fs.LocalFileSystem()
    theirs.initialize(jvm.java.net.URI("file:///"), conf)
    (tmp_path / "ours").mkdir()
    (tmp_path / "theirs").mkdir()

    def create(fs: Any, side: str, name: str) -> None:
        out = fs.create(hadoop.fs.Path(f"file://{tmp_path}/{side}/{name}"), True)
        out.write(b"eventlake")
        out.close()

    def chmod(fs: Any, side: str, name: str, mode: int) -> None:
        permission = hadoop.fs.permission.FsPermission(jvm.java.lang.Short(mode))
        fs.setPermission(hadoop.fs.Path(f"{tmp_path}/{side}/{name}"), permission)

    modes = (0o644, 0o600, 0o755, 0o640, 0o700, 0o000, 0o777)

    def write(fs: Any, side: str) -> None:
        for i, mode in enumerate(modes):
            create(fs, side, f"f{i}")
            chmod(fs, side, f"f{i}", mode)
        fs.mkdirs(hadoop.fs.Path(f"{tmp_path}/{side}/d"))
        chmod(fs, side, "d", 0o1777)  # a sticky bit: left to Hadoop

    started = _files(_processes(jvm, tmp_path, lambda: write(ours, "ours")))
    # Only the sticky bit forked, where Hadoop forks for every file and checksum file.
    assert [c.split()[:2] for c in started] == [["chmod", "1777"]], started
    hadoops = _files(_processes(jvm, tmp_path, lambda: write(theirs, "theirs")))
    assert len(hadoops) >= 3 * len(modes), hadoops

    def listing(side: str) -> dict[str, tuple[int, bytes]]:
        folder = tmp_path / side
        return {
            p.name: (stat.S_IMODE(p.stat().st_mode), p.read_bytes() if p.is_file() else b"")
            for p in folder.iterdir()
        }

    assert listing("ours") == listing("theirs")
    assert stat.S_IMODE((tmp_path / "ours" / "f1").stat().st_mode) == 0o600
    assert (tmp_path / "ours" / ".f0.crc").is_file()
    for p in (tmp_path / "ours", tmp_path / "theirs"):
        for f in p.iterdir():
            f.chmod(0o755 if f.is_dir() else 0o644)


def test_link_status_and_renames_match_hadoops(spark: SparkSession, tmp_path: Path) -> None:
    jvm = spark._jvm
    assert jvm is not None
    conf = spark._jsc.hadoopConfiguration()
    hadoop = jvm.org.apache.hadoop
    raw = jvm.eventlake.fs.InProcessLocalFileSystem.Raw()
    raw.initialize(jvm.java.net.URI("file:///"), conf)
    theirs = hadoop.fs.RawLocalFileSystem()
    theirs.initialize(jvm.java.net.URI("file:///"), conf)
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")

    def status(fs: Any, path: str) -> tuple[object, ...]:
        """The link status, or the Java exception's class (Hadoop's own for a dangling
        link given as a URI, whose `readlink` of "file:/..." finds no link)."""
        try:
            s = fs.getFileLinkStatus(hadoop.fs.Path(path))
        except Py4JJavaError as e:
            return (e.java_exception.getClass().getName(),)
        target = str(s.getSymlink()) if s.isSymlink() else None
        return (str(s.getPath()), s.getLen(), s.isDirectory(), s.isSymlink(), target,
                s.getModificationTime())  # fmt: skip

    seen = set()
    for name in ("file", "link", "dangling", "missing"):
        for path in (f"{tmp_path}/{name}", f"file://{tmp_path}/{name}"):
            got = status(raw, path)
            assert got == status(theirs, path), path
            seen.add(got[3:4] or got)  # is it a link, or the error
    # Regular files, links and errors were all compared.
    assert {(False,), (True,), ("java.io.FileNotFoundException",)} <= seen, seen

    # A Delta table's commits rename through FileContext: written and read back.
    table = tmp_path / "table"

    def commit_twice() -> None:
        for i in (0, 2):
            spark.range(i, i + 2).write.format("delta").mode("append").save(str(table))

    started = _processes(jvm, tmp_path, commit_twice)
    assert not _files(started), started
    assert sorted(r["id"] for r in read_delta(table).to_pylist()) == [0, 1, 2, 3]
