from __future__ import annotations

import os
from pathlib import Path

import pytest

from eventlake.config import load_settings
from eventlake.errors import ErrorCode, EventlakeError


def test_defaults_are_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert settings.spark.master == "local[*]"
    # Relative paths are made absolute against the working directory.
    lake = tmp_path / ".eventlake" / "lake" / "bronze" / "orders"
    assert settings.lake.table_path("bronze", "orders").path == lake
    assert settings.checkpoints.for_flow("orders", "bronze").path == (
        tmp_path / ".eventlake" / "checkpoints" / "orders" / "bronze"
    )


def test_yaml_and_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "eventlake.yaml"
    cfg.write_text(
        "kafka:\n  bootstrap_servers: broker:9092\n"
        "spark:\n  master: spark://head:7077\n  conf:\n    spark.executor.memory: 4g\n"
    )
    settings = load_settings(
        cfg,
        ["spark.conf.spark.sql.shuffle.partitions=8", "lake.root=/data/lake"],
    )
    assert settings.kafka.bootstrap_servers == "broker:9092"
    assert settings.spark.master == "spark://head:7077"
    assert settings.spark.conf == {
        "spark.executor.memory": "4g",
        "spark.sql.shuffle.partitions": "8",
    }
    assert settings.lake.root.path == Path("/data/lake")


def test_spark_conf_values_become_text() -> None:
    settings = load_settings(None, ["spark.conf.spark.sql.adaptive.enabled=false"])
    assert settings.spark.conf == {"spark.sql.adaptive.enabled": "false"}


def test_unknown_key_is_named(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("kafka:\n  bootstrap_server: x:1\n")
    with pytest.raises(EventlakeError) as info:
        load_settings(cfg)
    assert info.value.code == ErrorCode.CONFIG_UNKNOWN_KEY
    assert "kafka.bootstrap_server" in str(info.value)
    assert info.value.fix


def test_unknown_key_from_override() -> None:
    with pytest.raises(EventlakeError) as info:
        load_settings(None, ["lake.rooot=/x"])
    assert info.value.code == ErrorCode.CONFIG_UNKNOWN_KEY
    assert "lake.rooot" in str(info.value)


def test_bad_override_form() -> None:
    with pytest.raises(EventlakeError) as info:
        load_settings(None, ["kafka.bootstrap_servers"])
    assert info.value.code == ErrorCode.CONFIG_BAD_OVERRIDE


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(EventlakeError) as info:
        load_settings(tmp_path / "nope.yaml")
    assert info.value.code == ErrorCode.CONFIG_NOT_FOUND


def test_invalid_yaml(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("kafka: [\n")
    with pytest.raises(EventlakeError) as info:
        load_settings(cfg)
    assert info.value.code == ErrorCode.CONFIG_INVALID_YAML


def test_secret_from_environment_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EL_TEST_SASL_PASSWORD", "hunter2")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "kafka:\n  sasl_mechanism: PLAIN\n  sasl_username: app\n"
        "  sasl_password: ${EL_TEST_SASL_PASSWORD}\n"
    )
    settings = load_settings(cfg)
    assert settings.kafka.client_options()["sasl.password"] == "hunter2"
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings.model_dump(mode="json"))
    jaas = settings.kafka.spark_options()["kafka.sasl.jaas.config"]
    assert jaas.startswith("org.apache.kafka.common.security.plain.PlainLoginModule required ")
    assert 'password="hunter2"' in jaas


def test_scram_gets_the_scram_login_module(monkeypatch: pytest.MonkeyPatch) -> None:
    from eventlake.config.model import KafkaSettings

    monkeypatch.setenv("EL_TEST_SASL_PASSWORD", "s3cret")
    kafka = KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                          sasl_username="app",
                          sasl_password=os.environ["EL_TEST_SASL_PASSWORD"])  # fmt: skip
    spark = kafka.spark_options()
    assert spark["kafka.security.protocol"] == "SASL_SSL"
    assert spark["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert spark["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="app" password="s3cret";'
    )
    assert kafka.client_options()["sasl.mechanism"] == "SCRAM-SHA-512"


def test_a_private_ca_reaches_both_clients() -> None:
    from eventlake.config.model import KafkaSettings

    kafka = KafkaSettings(security_protocol="SSL", ssl_ca_location="/etc/kafka/ca.pem")
    spark = kafka.spark_options()
    assert spark["kafka.security.protocol"] == "SSL"
    assert spark["kafka.ssl.truststore.type"] == "PEM"
    assert spark["kafka.ssl.truststore.location"] == "/etc/kafka/ca.pem"
    assert kafka.client_options()["ssl.ca.location"] == "/etc/kafka/ca.pem"
    assert "kafka.ssl.truststore.location" not in KafkaSettings().spark_options()


def test_missing_environment_variable(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("kafka:\n  sasl_password: ${EL_TEST_SURELY_UNSET_VAR}\n")
    with pytest.raises(EventlakeError) as info:
        load_settings(cfg)
    assert info.value.code == ErrorCode.CONFIG_MISSING_ENV
    assert "EL_TEST_SURELY_UNSET_VAR" in str(info.value)


def test_log_checkpoint_commits_is_a_count() -> None:
    assert load_settings(None, []).lake.log_checkpoint_commits == 100
    assert load_settings(None, ["lake.log_checkpoint_commits=0"]).lake.log_checkpoint_commits == 0
    with pytest.raises(EventlakeError) as info:
        load_settings(None, ["lake.log_checkpoint_commits=-1"])
    assert info.value.code == ErrorCode.CONFIG_INVALID_VALUE
    assert "lake.log_checkpoint_commits" in str(info.value)


def test_java_client_properties_reach_spark_s_kafka_client_and_stay_secret(
    tmp_path: Path,
) -> None:
    from eventlake.secrets import masked

    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "kafka:\n  java_properties:\n    default.api.timeout.ms: 20000\n"
        "    client.dns.lookup: use_all_dns_ips\n    ssl.keystore.password: k3ystore\n"
    )
    settings = load_settings(cfg)
    spark = settings.kafka.spark_options()
    assert spark["kafka.default.api.timeout.ms"] == "20000"
    assert spark["kafka.client.dns.lookup"] == "use_all_dns_ips"
    assert "k3ystore" in settings.secret_values
    shown = str(masked(settings.model_dump(mode="json"), settings.secret_values))
    assert "k3ystore" not in shown
    assert "use_all_dns_ips" in shown
