"""Running on a Spark cluster: an embedded standalone cluster, and shipping code to it."""

from __future__ import annotations

from eventlake.cluster.code import code_archive, ship_code
from eventlake.cluster.standalone import (
    ClusterStatus,
    SparkStandaloneCluster,
    WorkerStatus,
    master_state,
    master_ui_url,
)

__all__ = [
    "ClusterStatus",
    "SparkStandaloneCluster",
    "WorkerStatus",
    "code_archive",
    "master_state",
    "master_ui_url",
    "ship_code",
]
