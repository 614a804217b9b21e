"""Connector declarations turn config into Spark's options, and refuse contradictions."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlake.connectors import DeltaInput, KafkaInput, MemoryOutput
from eventlake.context import FlowConfig
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines import Pipeline
from eventlake.testing import settings_for


def _config(tmp_path: Path, **params: object) -> FlowConfig:
    pipeline = Pipeline("opts")
    pipeline.flow(name="f", input=KafkaInput(), output=MemoryOutput())(lambda ctx, df: df)
    settings = settings_for(tmp_path, "127.0.0.1:9", opts={"topic": "t", **params})
    return pipeline.configs(settings)["f"]


def test_kafka_start_options_follow_the_params(tmp_path: Path) -> None:
    plain = KafkaInput().options(_config(tmp_path))
    assert (plain["subscribe"], plain["startingOffsets"]) == ("t", "earliest")
    assert "startingTimestamp" not in plain
    # A caught-up batch's first read waits for the last fetch at most this long, not 500 ms.
    assert plain["kafka.fetch.max.wait.ms"] == "50"

    timed = KafkaInput().options(_config(tmp_path, starting_timestamp="2026-01-01T00:00:00"))
    assert timed["startingTimestamp"] == "1767225600000"  # no zone: UTC
    assert timed["startingOffsetsByTimestampStrategy"] == "error"

    per_partition = '{"t": {"0": 1767225600000}}'
    by = KafkaInput().options(_config(tmp_path, starting_offsets_by_timestamp=per_partition,
                                      starting_timestamp_strategy="latest"))  # fmt: skip
    assert by["startingOffsetsByTimestamp"] == per_partition
    assert by["startingOffsetsByTimestampStrategy"] == "latest"

    pattern = KafkaInput(pattern=True).options(_config(tmp_path))
    assert pattern["subscribePattern"] == "t"
    assert "subscribe" not in pattern


def test_timestamp_strategy_is_checked(tmp_path: Path) -> None:
    with pytest.raises(EventlakeError) as bad:
        _config(tmp_path, starting_timestamp_strategy="earliest")
    assert bad.value.code == ErrorCode.CONFIG_INVALID_VALUE


@pytest.mark.parametrize(
    "options",
    [
        {"starting_version": 3, "starting_timestamp": "2026-01-01"},
        {"starting_version": "first"},
        {"change_feed": True, "skip_change_commits": True},
    ],
)
def test_delta_input_refuses_contradictions(options: dict[str, object]) -> None:
    with pytest.raises(EventlakeError) as bad:
        DeltaInput("silver", "t", **options)  # type: ignore[arg-type]
    assert bad.value.code == ErrorCode.PIPELINE_INVALID
    assert "DeltaInput('silver', 't')" in bad.value.what


@pytest.mark.parametrize(
    ("partitions", "cores", "tasks"),
    [
        (3, 2, 6),  # 2 tasks a partition, 3 a core
        (1, 2, 2),
        (3, 4, 12),
        (4, 2, None),  # 2 partitions a core already
        (6, 3, None),
        (5, 1, None),  # one core: nothing to balance
        (0, 2, None),  # no topic yet
    ],
)
def test_min_partitions_auto_splits_partitions_evenly_over_the_cores(
    partitions: int, cores: int, tasks: int | None
) -> None:
    from eventlake.connectors.kafka import balanced_tasks

    assert balanced_tasks(partitions, cores) == tasks
