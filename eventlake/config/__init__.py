"""Settings: one YAML file, ``--set dotted.key=value`` overrides, ``${ENV}`` for secrets."""

from __future__ import annotations

from eventlake.config.loader import apply_override, load_settings
from eventlake.config.model import (
    CheckpointSettings,
    KafkaSettings,
    LakeSettings,
    LogSettings,
    MetricsSettings,
    PostgresSettings,
    RestartSettings,
    Settings,
    SparkSettings,
)

__all__ = [
    "CheckpointSettings",
    "KafkaSettings",
    "LakeSettings",
    "LogSettings",
    "MetricsSettings",
    "PostgresSettings",
    "RestartSettings",
    "Settings",
    "SparkSettings",
    "apply_override",
    "load_settings",
]
