"""Kafka: the embedded KRaft broker (one node or a cluster) and admin/producer helpers."""

from __future__ import annotations

from eventlake.kafka.admin import create_topic, list_topics, produce, topic_offsets, wait_for_broker
from eventlake.kafka.broker import BrokerStatus, EmbeddedKafkaBroker, EmbeddedKafkaCluster

__all__ = [
    "BrokerStatus",
    "EmbeddedKafkaBroker",
    "EmbeddedKafkaCluster",
    "create_topic",
    "list_topics",
    "produce",
    "topic_offsets",
    "wait_for_broker",
]
