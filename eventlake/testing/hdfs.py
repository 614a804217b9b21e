"""A real HDFS on this machine for tests: Hadoop's MiniDFSCluster (a NameNode and
DataNodes in one JVM, from ``hadoop-client-minicluster``, `make test-jars`), on 127.0.0.1.

Spark reaches it with no extra jars: pyspark's shaded Hadoop client speaks ``hdfs://``.
"""

from __future__ import annotations

import json
from pathlib import Path

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.jars import HDFS_TEST_JARS, jar_files
from eventlake.processes import HOST, ManagedProcess, free_port, java_executable, port_open

MAIN = "org.apache.hadoop.test.MiniDFSClusterManager"
#: pyspark's own jars the minicluster runs with: its shaded Hadoop client and logging.
_PYSPARK_JARS = ("hadoop-client-api-", "hadoop-client-runtime-", "slf4j-api-",
                 "log4j-slf4j2-impl-", "log4j-api-", "log4j-core-", "log4j-1.2-api-",
                 "jcl-over-slf4j-")  # fmt: skip


def _classpath() -> str:
    import pyspark

    folder = Path(pyspark.__file__).parent / "jars"
    ours = [p for p in sorted(folder.glob("*.jar")) if p.name.startswith(_PYSPARK_JARS)]
    return ":".join(str(p) for p in [*jar_files(HDFS_TEST_JARS), *ours])


class EmbeddedHdfs:
    """``with EmbeddedHdfs(folder) as hdfs: hdfs.uri`` -> ``hdfs://127.0.0.1:<port>``."""

    def __init__(self, data_dir: Path, *, port: int | None = None, datanodes: int = 1) -> None:
        self.data_dir = data_dir.absolute()
        self.port = port or free_port()
        self.datanodes = datanodes
        self.process = ManagedProcess(
            "HDFS",
            pid_file=self.data_dir / "hdfs.pid",
            marker=MAIN,
            log_file=self.data_dir / "hdfs.log",
            failed=ErrorCode.HDFS_START_FAILED,
            fix=f"read {self.data_dir / 'hdfs.log'}; `make test-jars` if classes are missing",
        )

    @property
    def uri(self) -> str:
        return f"hdfs://{HOST}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.process.log_file

    @property
    def _details(self) -> Path:
        return self.data_dir / "details.json"

    def start(self, *, timeout: float = 120.0, format: bool = True) -> str:
        """Start the cluster (formatting its storage first unless ``format=False``, which
        restarts it on what an earlier start stored); return its URI once it answers."""
        if port_open(self.port):
            raise EventlakeError(
                ErrorCode.HDFS_START_FAILED,
                f"port {self.port} on {HOST} (the NameNode's) is already in use.",
                fix="start it on another port",
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._details.unlink(missing_ok=True)
        cmd = [
            java_executable("HDFS"), "-Xmx512m", "-Djava.awt.headless=true",
            f"-Dtest.build.data={self.data_dir}", "-cp", _classpath(), MAIN,
            *(["-format"] if format else []), "-nnport", str(self.port), "-httpport", "0",
            "-datanodes", str(self.datanodes), "-writeDetails", str(self._details),
            "-D", f"hdfs.minidfs.basedir={self.data_dir / 'dfs'}",
            "-D", "dfs.permissions.enabled=false",
        ]  # fmt: skip
        proc = self.process.launch(cmd, cwd=self.data_dir)
        self.process.await_ready(self._up, [proc], timeout=timeout, where=f"on port {self.port}")
        return self.uri

    def _up(self) -> bool:
        return self._details.is_file() and bool(json.loads(self._details.read_text() or "{}"))

    def stop(self, *, timeout: float = 30.0) -> bool:
        """Stop the cluster (SIGTERM, then SIGKILL); False when it was not running."""
        return self.process.stop(timeout=timeout)

    def __enter__(self) -> EmbeddedHdfs:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
