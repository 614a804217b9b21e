"""Shared fixtures: one real Kafka broker and one SparkSession for the whole run, and a
3-broker Kafka cluster for the tests that need one.

All start lazily: tests that use none start none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from eventlake.config import PostgresSettings, Settings, SparkSettings
from eventlake.kafka import EmbeddedKafkaBroker, EmbeddedKafkaCluster, create_topic
from eventlake.postgres import EmbeddedPostgres
from eventlake.session import get_spark
from eventlake.testing import free_port, unique_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
