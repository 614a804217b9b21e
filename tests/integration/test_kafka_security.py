"""A flow reading and a client writing a broker over SASL_SSL (SCRAM-SHA-512 on TLS with
a private CA), as a managed Kafka serves them: the ``kafka.*`` security keys, end to end."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.config import Settings
from eventlake.config.loader import settings_from_dict
from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.context import FlowContext
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.kafka import EmbeddedKafkaBroker, create_topic, produce
from eventlake.kafka.admin import upsert_scram_user
from eventlake.kafka.broker import SecureListener
from eventlake.pipelines import Pipeline
from eventlake.testing import free_port, read_delta, run_available_now, unique_name
from eventlake.testing.tls import TlsFiles, make_tls_files

pytestmark = pytest.mark.integration

secured = Pipeline("secured")


@secured.flow(input=KafkaInput(), output=DeltaOutput("bronze", "secured"))
def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
    return kafka_records(df)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def secure_broker(
    tmp_path_factory: pytest.TempPathFactory, tls: TlsFiles
) -> Iterator[EmbeddedKafkaBroker]:
    listener = SecureListener(free_port(), tls.keystore)
    broker = EmbeddedKafkaBroker(
        free_port(), tmp_path_factory.mktemp("secure-kafka"), secure=listener
    )
    broker.start()
    yield broker
    broker.stop()


def secure_settings(
    root: Path, broker: EmbeddedKafkaBroker, ca: Path, topic: str, password: str
) -> Settings:
    assert broker.secure is not None
    return settings_from_dict({
        "kafka": {
            "bootstrap_servers": broker.secure.bootstrap_servers,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "app",
            "sasl_password": password,
            "ssl_ca_location": str(ca),
        },
        "lake": {"root": str(root / "lake")},
        "checkpoints": {"root": str(root / "checkpoints")},
        "spark": {"master": "local[2]"},
        "pipelines": {"secured": {"topic": topic}},
    })  # fmt: skip


def test_a_flow_reads_a_sasl_ssl_broker_with_a_private_ca(
    spark: SparkSession, secure_broker: EmbeddedKafkaBroker, tls: TlsFiles, tmp_path: Path
) -> None:
    password = secrets.token_urlsafe(16)
    upsert_scram_user(secure_broker.bootstrap_servers, "app", password)
    topic = unique_name("secured")
    create_topic(secure_broker.bootstrap_servers, topic, partitions=2)
    settings = secure_settings(tmp_path, secure_broker, tls.ca, topic, password)
    events = [json.dumps({"id": i}) for i in range(50)]
    # eventlake's own client (librdkafka) writes over SASL_SSL with the same settings.
    produce(settings.kafka.bootstrap_servers, topic, [(str(i), e) for i, e in enumerate(events)],
            options=settings.kafka.client_options())  # fmt: skip

    result = run_available_now(secured, settings)
    assert result.flows["secured.bronze"].input_rows == len(events)
    rows = read_delta(tmp_path / "lake" / "bronze" / "secured").to_pylist()
    assert sorted(r["value"] for r in rows) == sorted(events)

    # A wrong password is refused by the broker before any batch runs.
    wrong = secure_settings(tmp_path / "wrong", secure_broker, tls.ca, topic, "not-" + password)
    with pytest.raises(EventlakeError) as err:
        run_available_now(secured, wrong)
    assert err.value.code == ErrorCode.KAFKA_AUTHENTICATION_FAILED
    assert f"the Kafka broker at {secure_broker.secure.bootstrap_servers} refused the login" in str(
        err.value
    )
    assert password not in str(err.value)
    assert not (tmp_path / "wrong" / "lake" / "bronze" / "secured").exists()
