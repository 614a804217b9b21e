"""Shared fixtures: one real Kafka broker and one SparkSession for the whole run, and a
3-broker Kafka cluster, a 2-worker Spark standalone cluster and an HDFS for the tests that
need one.

All start lazily: tests that use none start none. `make test` runs the suite on two
pytest-xdist workers (each with its own broker and SparkSession); the tests that share a
heavy fixture run on one worker, so each of those starts once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from eventlake.cluster import SparkStandaloneCluster
from eventlake.config import PostgresSettings, Settings, SparkSettings
from eventlake.kafka import EmbeddedKafkaBroker, EmbeddedKafkaCluster, create_topic
from eventlake.postgres import EmbeddedPostgres
from eventlake.session import get_spark
from eventlake.testing import free_port, unique_name
from eventlake.testing.hdfs import EmbeddedHdfs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: Session fixtures too heavy to start on every worker: their tests go to one worker each.
HEAVY_FIXTURES = ("hdfs", "kafka_cluster", "spark_cluster")

#: The JIT options of every Spark driver JVM the suite starts (spark-submit reads
#: SPARK_SUBMIT_OPTS): C1 only. Most of those drivers are runs of `eventlake` in a process of
#: their own that live a minute or two, and on 2 cores C2's compiles cost them more than
#: they win: the three stop-signal runs of the orders pipeline took 86-92 s with it against
#: 150-179 s without; an in-process test, 134 s against 131 s.
#: C1 alone gets a 48 MB code cache, which each worker's SparkSession fills with the code
#: of the hundreds of queries its tests plan: past 90% full the JVM sweeps it without a
#: pause, and the sweeper thread took 40% of that JVM's CPU (76-80 s of 165-193 s over 40
#: in-process tests, 390 s). With 240 MB the same tests took 314 s; a whole suite left 98
#: and 162 MB in use in its two sessions, so they get 512 MB (reserved, not committed).
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m"


def pytest_configure(config: pytest.Config) -> None:
    import os

    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if QUICK_JIT not in options:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{options} {QUICK_JIT}".strip()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``: a test that needs a heavy fixture joins that fixture's
    group (a test's own ``xdist_group`` mark wins). First of the hook's implementations:
    xdist's worker turns the marks into group names in its own, registered after this
    file, which pluggy would otherwise call first."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        needed = getattr(item, "fixturenames", ())
        group = next((name for name in HEAVY_FIXTURES if name in needed), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafkaBroker]:
    broker = EmbeddedKafkaBroker(port=free_port(), data_dir=tmp_path_factory.mktemp("kafka"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedKafkaCluster]:
    """Three KRaft nodes; topics created without a replication factor get 3 copies."""
    ports = [free_port() for _ in range(3)]
    cluster = EmbeddedKafkaCluster(ports=ports, data_dir=tmp_path_factory.mktemp("cluster"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    """A Spark standalone master and two 1-core workers, started and stopped by the CLI."""
    from tests.integration.cli_helpers import run_cli

    port, ui_port = free_port(), free_port()
    folder = tmp_path_factory.mktemp("spark-cluster")
    shape = ["--workers", "2", "--cores", "1", "--memory", "1g", "--port", str(port),
             "--ui-port", str(ui_port), "--data-dir", str(folder)]  # fmt: skip
    started = run_cli("cluster", "start", *shape, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
    yield SparkStandaloneCluster(2, 1, "1g", port=port, ui_port=ui_port, data_dir=folder)
    stopped = run_cli("cluster", "stop", *shape, timeout=120)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedHdfs]:
    """A MiniDFSCluster (NameNode and one DataNode); tests use a unique folder each."""
    with EmbeddedHdfs(tmp_path_factory.mktemp("hdfs")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def bootstrap(kafka_broker: EmbeddedKafkaBroker) -> str:
    return kafka_broker.bootstrap_servers


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    warehouse = tmp_path_factory.mktemp("warehouse")
    settings = Settings(
        spark=SparkSettings(
            master="local[2]",
            app_name="eventlake-tests",
            conf={
                "spark.sql.shuffle.partitions": "2",
                "spark.sql.warehouse.dir": str(warehouse),
                "spark.default.parallelism": "2",
            },
        )
    )
    session = get_spark(settings)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresSettings]:
    """A real PostgreSQL server (Debian's package) on a free port, for the whole run."""
    import os
    import secrets
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="eventlake-pg-"))
    folder.chmod(0o755)  # the postgres user (when tests run as root) must reach it
    password = secrets.token_urlsafe(16)
    settings = PostgresSettings(port=free_port(), password=password)
    server = EmbeddedPostgres(settings, folder / "data")
    server.start()
    # Subprocess configs read it as ${EVENTLAKE_TEST_PG_PASSWORD}: never written to a file.
    os.environ["EVENTLAKE_TEST_PG_PASSWORD"] = password
    yield settings
    server.remove()


@pytest.fixture
def make_topic(bootstrap: str) -> Callable[..., str]:
    """Create a uniquely named topic: ``make_topic(partitions=3)``."""

    def make(partitions: int = 1, prefix: str = "topic") -> str:
        name = unique_name(prefix)
        create_topic(bootstrap, name, partitions=partitions)
        return name

    return make


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A per-test lake root; checkpoints go beside it under ``checkpoints``."""
    root = tmp_path / "lake"
    root.mkdir()
    return root


@pytest.fixture(autouse=True)
def _stop_leftover_queries(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "spark" in request.fixturenames:
        session: SparkSession = request.getfixturevalue("spark")
        for query in session.streams.active:
            query.stop()
