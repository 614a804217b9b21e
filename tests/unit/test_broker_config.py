"""What each embedded broker is configured with: alone, one copy of everything; in a
cluster, its own node id, every controller as a voter, and 3 copies with 2 in sync."""

from __future__ import annotations

from pathlib import Path

from eventlake.kafka.broker import EmbeddedKafkaBroker, EmbeddedKafkaCluster, Quorum


def _props(broker: EmbeddedKafkaBroker, controller_port: int) -> dict[str, str]:
    broker.data_dir.mkdir(parents=True, exist_ok=True)
    broker.write_config(controller_port)
    lines = (broker.data_dir / "server.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line)


def test_a_single_broker_keeps_one_copy(tmp_path: Path) -> None:
    props = _props(EmbeddedKafkaBroker(9100, tmp_path / "one"), 9200)
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9200"
    assert props["default.replication.factor"] == "1"
    assert props["min.insync.replicas"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"


def test_a_cluster_node_votes_with_every_controller_and_keeps_three_copies(
    tmp_path: Path,
) -> None:
    quorum = Quorum("abc", (9201, 9202, 9203))
    props = _props(EmbeddedKafkaBroker(9102, tmp_path / "n2", node_id=2, quorum=quorum), 9202)
    assert props["node.id"] == "2"
    assert props["controller.quorum.voters"] == (
        "1@127.0.0.1:9201,2@127.0.0.1:9202,3@127.0.0.1:9203"
    )
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9102,CONTROLLER://127.0.0.1:9202"
    assert props["default.replication.factor"] == "3"
    assert props["offsets.topic.replication.factor"] == "3"
    assert props["min.insync.replicas"] == "2"


def test_a_cluster_keeps_its_id_and_ports_across_restarts(tmp_path: Path) -> None:
    first = EmbeddedKafkaCluster(3, 9300, tmp_path / "c")
    again = EmbeddedKafkaCluster(3, 9300, tmp_path / "c")
    assert [n.quorum for n in first.nodes] == [n.quorum for n in again.nodes]
    assert first.bootstrap_servers == "127.0.0.1:9300,127.0.0.1:9301,127.0.0.1:9302"
    assert [n.node_id for n in again.nodes] == [1, 2, 3]
    assert len({n.data_dir for n in again.nodes}) == 3


def test_a_cluster_started_with_another_broker_count_is_refused(tmp_path: Path) -> None:
    import pytest

    from eventlake.errors import ErrorCode, EventlakeError

    EmbeddedKafkaCluster(3, 9300, tmp_path / "c")
    with pytest.raises(EventlakeError) as error:
        EmbeddedKafkaCluster(2, 9300, tmp_path / "c")
    assert error.value.code == ErrorCode.KAFKA_BROKER_START_FAILED
    assert "--brokers 3" in str(error.value)
