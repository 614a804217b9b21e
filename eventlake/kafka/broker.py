"""Real Kafka brokers (KRaft, each broker+controller) run as background JVMs: one node
(:class:`EmbeddedKafkaBroker`) or a cluster of them (:class:`EmbeddedKafkaCluster`).

The broker's jars are the kafka-broker set of the jar lock (``eventlake jars fetch``).
Each broker owns a data folder holding its ``server.properties``, its log directory,
``broker.json`` (ports, cluster id) and ``broker.pid``; brokers with different ports and
folders run side by side.
The processes outlive the CLI call that started them, until ``stop``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.jars import BROKER_JARS, jar_files
from eventlake.kafka.admin import list_topics
from eventlake.paths import state_dir
from eventlake.processes import HOST, ManagedProcess, free_port, java_executable, port_open

DEFAULT_PORT = 9092

_LOG4J = """\
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
logger.state.name = state.change.logger
logger.state.level = warn
"""


@dataclass(frozen=True)
class Quorum:
    """What the nodes of one cluster share: its id, its controllers and how many copies
    of each partition it keeps."""

    cluster_id: str
    #: Each node's controller port, node ids 1..N in order.
    controller_ports: tuple[int, ...]

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@{HOST}:{p}" for i, p in enumerate(self.controller_ports, 1))

    @property
    def replicas(self) -> int:
        """3 for a cluster of 3 or more (with ``min.insync.replicas`` 2), else the nodes."""
        return min(len(self.controller_ports), 3)


def _cluster_id() -> str:
    # Kafka cluster ids are 16 random bytes, base64url without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str
    data_dir: Path


@dataclass(frozen=True)
class SecureListener:
    """A ``SASL_SSL`` listener beside the plaintext one, as managed Kafka services offer:
    SCRAM-SHA-512 logins over TLS with the key and certificate chain in one PEM file
    (``keystore``, an unencrypted PKCS#8 key first). Users are added with the admin API
    (:func:`eventlake.kafka.admin.upsert_scram_user`) on the plaintext listener."""

    port: int
    keystore: Path

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"


class EmbeddedKafkaBroker:
    """Start, stop and inspect one local broker bound to 127.0.0.1: on its own, or node
    ``node_id`` of a cluster's ``quorum``; with a ``secure`` listener when given."""

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        data_dir: Path | None = None,
        *,
        heap: str = "768m",
        node_id: int = 1,
        quorum: Quorum | None = None,
        secure: SecureListener | None = None,
    ) -> None:
        self.port = port
        self.secure = secure
        self.data_dir = (data_dir or state_dir() / f"kafka-{port}").absolute()
        self.heap = heap
        self.node_id = node_id
        self.quorum = quorum
        self.process = ManagedProcess(
            "the Kafka broker",
            pid_file=self.data_dir / "broker.pid",
            marker=str(self._config_file),
            log_file=self.data_dir / "logs" / "stdout.log",
            failed=ErrorCode.KAFKA_BROKER_START_FAILED,
            fix=f"read {self.log_file}; `eventlake jars fetch` if classes are missing",
        )

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "logs" / "server.log"

    @property
    def _meta_file(self) -> Path:
        return self.data_dir / "broker.json"

    @property
    def _config_file(self) -> Path:
        return self.data_dir / "server.properties"

    def status(self) -> BrokerStatus:
        pid = self.process.pid()
        return BrokerStatus(pid is not None, pid, self.bootstrap_servers, self.data_dir)

    def _classpath(self) -> str:
        return ":".join(str(j) for j in jar_files(BROKER_JARS))

    def _meta(self) -> dict[str, object]:
        if self._meta_file.is_file():
            meta: dict[str, object] = json.loads(self._meta_file.read_text())
            return meta
        if self.quorum is not None:
            cluster_id = self.quorum.cluster_id
            controller_port = self.quorum.controller_ports[self.node_id - 1]
        else:
            cluster_id, controller_port = _cluster_id(), free_port()
        meta = {"cluster_id": cluster_id, "port": self.port, "controller_port": controller_port}
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._meta_file.write_text(json.dumps(meta, indent=2))
        return meta

    def write_config(self, controller_port: int) -> None:
        """Write the node's ``server.properties`` for a quorum on ``controller_port``."""
        logs = self.data_dir / "kafka-logs"
        quorum = self.quorum or Quorum("", (controller_port,))
        copies, in_sync = str(quorum.replicas), str(min(quorum.replicas, 2))
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": quorum.voters,
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(logs),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            # Topics created without a replication factor get the cluster's: 3 copies,
            # 2 of them in sync for an acks=all write, on a cluster of 3 or more.
            "default.replication.factor": copies,
            "min.insync.replicas": in_sync,
            "offsets.topic.replication.factor": copies,
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": copies,
            "transaction.state.log.min.isr": in_sync,
            "transaction.state.log.num.partitions": "3",
            "share.coordinator.state.topic.replication.factor": copies,
            "share.coordinator.state.topic.min.isr": in_sync,
            "group.initial.rebalance.delay.ms": "0",
            "log.retention.hours": "-1",
        }
        if self.secure is not None:
            secure = f"SASL_SSL://{HOST}:{self.secure.port}"
            props["listeners"] += f",{secure}"
            props["advertised.listeners"] += f",{secure}"
            props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
            props["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
            props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            )
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(self.secure.keystore)
        self._config_file.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.data_dir / "log4j2.properties").write_text(_LOG4J.format(log=self.log_file))

    def _format_storage(self, java: str, cluster_id: str) -> None:
        if (self.data_dir / "kafka-logs" / "meta.properties").is_file():
            return
        cmd = [
            java,
            "-cp",
            self._classpath(),
            f"-Dlog4j2.configurationFile=file:{self.data_dir / 'log4j2.properties'}",
            "kafka.tools.StorageTool",
            "format",
            f"--cluster-id={cluster_id}",
            f"--config={self._config_file}",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise EventlakeError(
                ErrorCode.KAFKA_BROKER_START_FAILED,
                f"formatting the broker storage in {self.data_dir} failed: "
                f"{(result.stderr or result.stdout).strip()[-800:]}",
                expected="an empty or eventlake-formatted data folder",
                fix="delete the data folder, or pass another --data-dir",
            )

    def start(self, *, timeout: float = 90.0) -> BrokerStatus:
        """Start the broker and return once it answers; a no-op if it already runs."""
        current = self.status()
        if current.running:
            return current
        return self.wait_ready(self.launch(), timeout=timeout)

    def launch(self) -> subprocess.Popen[bytes]:
        """Start the broker's JVM without waiting for it (a cluster's nodes answer only
        once a majority of its controllers runs)."""
        meta = self._meta()
        if int(str(meta["port"])) != self.port:
            meta["port"] = self.port
            self._meta_file.write_text(json.dumps(meta, indent=2))
        controller_port = int(str(meta["controller_port"]))
        for port, role in ((self.port, "client"), (controller_port, "controller")):
            if port_open(port):
                raise EventlakeError(
                    ErrorCode.KAFKA_PORT_IN_USE,
                    f"port {port} on {HOST} (the broker's {role} port) is already in use by "
                    "another process.",
                )
        java = java_executable("the Kafka broker")
        self.write_config(controller_port)
        self._format_storage(java, str(meta["cluster_id"]))
        cmd = [
            java,
            f"-Xmx{self.heap}",
            "-Xms256m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile=file:{self.data_dir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.log_file.parent}",
            "-cp",
            self._classpath(),
            "kafka.Kafka",
            str(self._config_file),
        ]
        return self.process.launch(cmd, cwd=self.data_dir)

    def wait_ready(self, proc: subprocess.Popen[bytes], *, timeout: float = 90.0) -> BrokerStatus:
        """Return once the launched broker answers; EL-KAFKA-001 if it exits or stays mute."""
        self.process.await_ready(
            self._answers, [proc], timeout=timeout, where=f"at {self.bootstrap_servers}"
        )
        return self.status()

    def _answers(self) -> bool:
        try:
            list_topics(self.bootstrap_servers, timeout=1.0)
        except EventlakeError:
            return False
        return True

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the broker's output and log."""
        return self.process.tail(lines, self.log_file)

    def stop(self, *, timeout: float = 60.0) -> bool:
        """Shut the broker down cleanly (SIGTERM, then SIGKILL after ``timeout``).

        Returns False when it was not running; safe to call any number of times.
        """
        return self.process.stop(timeout=timeout)

    def __enter__(self) -> EmbeddedKafkaBroker:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class EmbeddedKafkaCluster:
    """``brokers`` local nodes forming one KRaft cluster (each a broker and a controller),
    on client ports ``port``, ``port + 1``... (or ``ports``), data under ``data_dir``.

    Topics created without a replication factor get 3 copies and ``min.insync.replicas``
    2: an ``acks=all`` write survives one node down, and a node's loss loses nothing.
    """

    def __init__(
        self,
        brokers: int = 3,
        port: int = DEFAULT_PORT,
        data_dir: Path | None = None,
        *,
        ports: list[int] | None = None,
        heap: str = "512m",
    ) -> None:
        ports = ports or [port + i for i in range(brokers)]
        self.data_dir = (data_dir or state_dir() / f"kafka-cluster-{ports[0]}").absolute()
        quorum = self._quorum(len(ports))
        self.nodes = [
            EmbeddedKafkaBroker(p, self.data_dir / f"node-{i}", heap=heap, node_id=i,
                                quorum=quorum)
            for i, p in enumerate(ports, 1)
        ]  # fmt: skip

    def _quorum(self, brokers: int) -> Quorum:
        path = self.data_dir / "cluster.json"
        if path.is_file():
            meta = json.loads(path.read_text())
            if len(meta["controller_ports"]) == brokers:
                return Quorum(meta["cluster_id"], tuple(meta["controller_ports"]))
            raise EventlakeError(
                ErrorCode.KAFKA_BROKER_START_FAILED,
                f"the cluster in {self.data_dir} has {len(meta['controller_ports'])} brokers, "
                f"not {brokers}.",
                expected="the broker count the cluster was created with",
                fix=f"pass --brokers {len(meta['controller_ports'])}, or another --data-dir",
            )
        quorum = Quorum(_cluster_id(), tuple(free_port() for _ in range(brokers)))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ports = list(quorum.controller_ports)
        path.write_text(json.dumps({"cluster_id": quorum.cluster_id, "controller_ports": ports}))
        return quorum

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap_servers for n in self.nodes)

    def status(self) -> list[BrokerStatus]:
        return [n.status() for n in self.nodes]

    def start(self, *, timeout: float = 120.0) -> list[BrokerStatus]:
        """Start every node not running, together, and return once each answers."""
        launched = [(n, n.launch()) for n in self.nodes if not n.status().running]
        try:
            for node, proc in launched:
                node.wait_ready(proc, timeout=timeout)
        except EventlakeError:
            self.stop()
            raise
        return self.status()

    def stop(self, *, timeout: float = 30.0) -> bool:
        """Stop every node; False when none was running.

        All are signalled at once: one by one, the last nodes would wait on a quorum
        already gone.
        """
        pids = [pid for pid in (n.status().pid for n in self.nodes) if pid is not None]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        return any([n.stop(timeout=timeout) for n in self.nodes])

    def __enter__(self) -> EmbeddedKafkaCluster:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
