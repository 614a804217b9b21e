"""A Spark standalone cluster on 127.0.0.1: a master and workers from pyspark's own
``bin/spark-class``, run as background JVMs until ``stop``.

The cluster's folder holds ``cluster.json`` (its shape and ports), a pid file and a log per
process, and each worker's work folder (executors' stdout/stderr per application).
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.paths import state_dir
from eventlake.processes import HOST, ManagedProcess, free_port, java_executable, port_open

DEFAULT_PORT = 7077
DEFAULT_UI_PORT = 8080
#: The Spark setting naming the master's web UI port, read by drivers too (its ``/json/``
#: gives the cluster's cores).
UI_PORT_CONF = "spark.master.ui.port"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """pyspark's folder: it ships ``bin/spark-class`` and the jars a standalone cluster runs."""
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass(frozen=True)
class WorkerStatus:
    """One worker as the master sees it (``state`` None: not registered)."""

    name: str
    pid: int | None
    state: str | None
    cores: int
    memory_mb: int


@dataclass(frozen=True)
class ClusterStatus:
    master_url: str
    ui_url: str
    master_pid: int | None
    workers: list[WorkerStatus]

    @property
    def running(self) -> bool:
        return self.master_pid is not None and all(
            w.pid is not None and w.state == "ALIVE" for w in self.workers
        )

    @property
    def cores(self) -> int:
        return sum(w.cores for w in self.workers if w.state == "ALIVE")


def master_state(ui_url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The master's ``/json/`` (workers, cores, applications), or None when it is not up."""
    try:
        with urllib.request.urlopen(f"{ui_url}/json/", timeout=timeout) as response:
            state: dict[str, Any] = json.loads(response.read())
            return state
    except (OSError, urllib.error.URLError, ValueError):
        return None


def master_host(master: str) -> str | None:
    """The host of a ``spark://host:port`` master (None for other masters, and for a
    list of standby masters)."""
    if not master.startswith("spark://") or "," in master:
        return None
    return master.removeprefix("spark://").rsplit(":", 1)[0]


def master_ui_url(master: str, ui_port: int) -> str | None:
    """The web UI of a ``spark://host:port`` master (None for other masters)."""
    host = master_host(master)
    return None if host is None else f"http://{host}:{ui_port}"


class SparkStandaloneCluster:
    """``workers`` workers of ``cores`` cores and ``memory`` for executors each, and their
    master at ``spark://127.0.0.1:<port>`` (web UI at ``ui_port``), data under ``data_dir``."""

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        *,
        port: int = DEFAULT_PORT,
        ui_port: int = DEFAULT_UI_PORT,
        data_dir: Path | None = None,
    ) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port = port
        self.ui_port = ui_port
        self.data_dir = (data_dir or state_dir() / f"spark-cluster-{port}").absolute()

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    @property
    def _meta_file(self) -> Path:
        return self.data_dir / "cluster.json"

    def _names(self) -> list[str]:
        return ["master"] + [f"worker-{i}" for i in range(1, self.workers + 1)]

    def _properties(self, name: str) -> Path:
        return self.data_dir / f"{name}.properties"

    def process(self, name: str) -> ManagedProcess:
        """The master's (``master``) or a worker's (``worker-N``) process."""
        return ManagedProcess(
            f"the Spark {name}",
            pid_file=self.data_dir / f"{name}.pid",
            marker=str(self._properties(name)),
            log_file=self.log_file(name),
            failed=ErrorCode.CLUSTER_START_FAILED,
            fix=f"read the logs in {self.data_dir / 'logs'}",
        )

    def _pid(self, name: str) -> int | None:
        return self.process(name).pid()

    def _meta(self) -> dict[str, Any]:
        """``cluster.json``: the shape and ports the folder was created with ({} if new)."""
        if not self._meta_file.is_file():
            return {}
        meta: dict[str, Any] = json.loads(self._meta_file.read_text())
        return meta

    def log_file(self, name: str) -> Path:
        return self.data_dir / "logs" / f"{name}.log"

    def _check_shape(self) -> None:
        """A folder keeps the cluster it was created with: same workers, cores, memory."""
        meta = self._meta()
        if not meta:
            return
        shape = {"workers": self.workers, "cores": self.cores, "memory": self.memory}
        created = {k: meta[k] for k in shape}
        if created != shape:
            was = " ".join(f"--{k} {v}" for k, v in created.items())
            raise EventlakeError(
                ErrorCode.CLUSTER_START_FAILED,
                f"the Spark cluster in {self.data_dir} was created with {was}.",
                expected="the shape the cluster was created with",
                fix=f"pass {was}, or another --data-dir",
            )

    def status(self) -> ClusterStatus:
        """Each process's pid, and each worker's state and resources from the master."""
        master_pid = self._pid("master")
        state = master_state(self.ui_url) if master_pid is not None else None
        alive = {
            int(w["port"]): w for w in (state or {}).get("workers", []) if w["state"] == "ALIVE"
        }
        ports = self._meta().get("worker_ports", {})
        workers = []
        for name in self._names()[1:]:
            seen = alive.get(int(ports.get(name, -1)))
            workers.append(WorkerStatus(
                name, self._pid(name), seen["state"] if seen else None,
                int(seen["cores"]) if seen else 0, int(seen["memory"]) if seen else 0,
            ))  # fmt: skip
        return ClusterStatus(self.master_url, self.ui_url, master_pid, workers)

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        java = java_executable("the Spark cluster")
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": "512m",
            "SPARK_NO_DAEMONIZE": "1",
        }
        if "JAVA_HOME" not in env:
            env["JAVA_HOME"] = str(Path(java).resolve().parent.parent)
        self._properties(name).write_text(f"# {name} of {self.master_url}\n")
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        cmd += ["--properties-file", str(self._properties(name))]
        return self.process(name).launch(cmd, cwd=self.data_dir, env=env)

    def _wait(self, what: str, ready: Callable[[], bool], procs: list[subprocess.Popen[bytes]],
              timeout: float) -> None:  # fmt: skip
        self.process(what).await_ready(
            ready, procs, timeout=timeout, where=f"at {self.ui_url}", on_failure=self.stop
        )

    def start(self, *, timeout: float = 120.0) -> ClusterStatus:
        """Start the master and the workers not running; return once every worker is ALIVE
        at the master. A no-op for a cluster that runs."""
        self._check_shape()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._pid("master") is None:
            for port, role in ((self.port, "master"), (self.ui_port, "master web UI")):
                if port_open(port):
                    raise EventlakeError(
                        ErrorCode.CLUSTER_PORT_IN_USE,
                        f"port {port} on {HOST} (the Spark {role} port) is already in use by "
                        "another process.",
                    )
            master = self._launch("master", [
                MASTER_CLASS, "--host", HOST, "--port", str(self.port),
                "--webui-port", str(self.ui_port),
            ])  # fmt: skip
            self._wait("master", lambda: master_state(self.ui_url) is not None, [master], timeout)
        ports: dict[str, int] = self._meta().get("worker_ports", {})
        launched = []
        for name in self._names()[1:]:
            if self._pid(name) is not None:
                continue
            ports[name] = free_port()
            work = self.data_dir / name
            work.mkdir(exist_ok=True)
            launched.append(self._launch(name, [
                WORKER_CLASS, "--host", HOST, "--port", str(ports[name]),
                "--webui-port", str(free_port()), "--cores", str(self.cores),
                "--memory", self.memory, "--work-dir", str(work), self.master_url,
            ]))  # fmt: skip
        self._meta_file.write_text(json.dumps({
            "workers": self.workers, "cores": self.cores, "memory": self.memory,
            "port": self.port, "ui_port": self.ui_port, "worker_ports": ports,
        }, indent=2))  # fmt: skip
        self._wait("worker", lambda: self.status().running, launched, timeout)
        return self.status()

    def stop(self, *, timeout: float = 30.0) -> bool:
        """Stop the workers, then the master; False when none was running."""
        stopped = [self.process(name).stop(timeout=timeout) for name in reversed(self._names())]
        return any(stopped)

    def __enter__(self) -> SparkStandaloneCluster:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_UI_PORT",
    "ClusterStatus",
    "SparkStandaloneCluster",
    "WorkerStatus",
    "master_host",
    "master_state",
    "master_ui_url",
]
