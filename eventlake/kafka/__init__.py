"""Kafka: the embedded single-node KRaft broker and admin/producer helpers."""

from __future__ import annotations

from eventlake.kafka.admin import create_topic, list_topics, produce, topic_offsets, wait_for_broker
from eventlake.kafka.broker import BrokerStatus, EmbeddedKafkaBroker

__all__ = [
    "BrokerStatus",
    "EmbeddedKafkaBroker",
    "create_topic",
    "list_topics",
    "produce",
    "topic_offsets",
    "wait_for_broker",
]
