from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from eventlake.monitoring.lag import PartitionLag, parse_kafka_offsets
from eventlake.monitoring.metrics import PipelineMetrics
from eventlake.monitoring.progress import BatchProgress


def families(metrics: PipelineMetrics) -> dict[str, list]:
    text = metrics.exposition().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_metrics_follow_prometheus_conventions_and_carry_each_batch() -> None:
    metrics = PipelineMetrics("orders")
    metrics.flow_started("silver", "10 seconds")
    metrics.flow_started("bronze", "available-now")
    batch = BatchProgress(
        query="orders.silver", batch_id=4, input_rows=120, input_rows_per_second=10.0,
        processed_rows_per_second=30.0, batch_duration_ms=1500,
        watermark="2026-01-01T00:10:00.000Z", state_rows=70, dropped_by_watermark=3,
        operators=(("dedupeWithinWatermark", 70, 4096),), timestamp=1795428000.0,
        output_rows=110, quarantined_rows=5,
    )  # fmt: skip
    metrics.batch(batch)
    metrics.batch(batch)
    metrics.lag("silver", [PartitionLag("orders", 0, 10, 25, 15, 4.5)])
    got = families(metrics)

    def one(name: str, flow: str = "silver") -> float:
        [value] = [s.value for s in got[name] if s.labels.get("flow") == flow
                   and not s.name.endswith(("_bucket", "_count", "_sum"))]  # fmt: skip
        return float(value)

    assert one("eventlake_input_rows") == 240
    assert one("eventlake_processed_rows") == 220
    assert one("eventlake_quarantined_rows") == 10
    assert one("eventlake_rows_dropped_by_watermark") == 6
    assert one("eventlake_late_rows_kept") == 0  # from the late keeper, not the progress
    assert one("eventlake_watermark_seconds") == 1767226200.0  # 2026-01-01T00:10:00Z
    assert (one("eventlake_state_rows"), one("eventlake_state_bytes")) == (70, 4096)
    assert one("eventlake_last_batch_id") == 4
    assert one("eventlake_last_commit_timestamp_seconds") == 1795428001.5
    assert one("eventlake_kafka_lag_records") == 15
    assert one("eventlake_kafka_lag_seconds") == 4.5
    assert one("eventlake_trigger_interval_seconds") == 10
    assert one("eventlake_trigger_interval_seconds", "bronze") == 0
    assert one("eventlake_input_rows", "bronze") == 0  # every flow's series from the start
    count = [s for s in got["eventlake_batch_duration_seconds"]
             if s.name.endswith("_count") and s.labels["flow"] == "silver"]  # fmt: skip
    assert count[0].value == 2
    assert {s.labels["pipeline"] for fam in got.values() for s in fam} == {"orders"}
    assert not [n for n in got if n.endswith("_created")]


def test_kafka_offsets_are_read_from_spark_text_and_nothing_else() -> None:
    assert parse_kafka_offsets('{"t": {"0": 5, "1": 9}}') == {"t": {0: 5, 1: 9}}
    assert parse_kafka_offsets('{"sourceVersion": 1, "reservoirVersion": 3}') == {}
    assert parse_kafka_offsets("not json") == {}
    assert parse_kafka_offsets(None) == {}


def test_maintenance_failures_count_each_failed_action_once_however_often_read() -> None:
    metrics = PipelineMetrics("users")
    last = {"kind": "compact", "at": 1.0, "error": "FileNotFoundException: part-0"}
    metrics.maintenance_failures({"silver/users": {"counts": {"compact": 2}, "last": last}})
    metrics.maintenance_failures({"silver/users": {"counts": {"compact": 2}, "last": last}})
    metrics.maintenance_failures({"silver/users": {"counts": {"compact": 3, "vacuum": 1},
                                                   "last": last}})  # fmt: skip
    got = families(metrics)["eventlake_table_maintenance_failures"]
    counts = {(s.labels["table"], s.labels["kind"]): s.value for s in got
              if s.name == "eventlake_table_maintenance_failures_total"}  # fmt: skip
    assert counts == {("silver/users", "compact"): 3.0, ("silver/users", "vacuum"): 1.0}
