"""The continuous trigger: a Kafka -> Kafka map runs as long-running tasks, each record
through as it arrives, until the run is stopped."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from eventlake.connectors import KafkaInput, KafkaOutput
from eventlake.context import FlowContext
from eventlake.kafka import produce, topic_offsets
from eventlake.pipelines import Pipeline, PipelineParams
from eventlake.testing import consume_topic, running_pipeline, settings_for, wait_until

pytestmark = pytest.mark.integration


class MapParams(PipelineParams):
    out_topic: str = ""


continuous = Pipeline("continuous_map", params=MapParams)


@continuous.flow(input=KafkaInput(), output=KafkaOutput("out_topic"), trigger="continuous")
def shouted(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Each record's value in capitals, under its key."""
    from pyspark.sql import functions as F

    return df.select("key", F.upper(F.col("value").cast("string")).alias("value"))


def test_continuous_kafka_to_kafka_map(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    source, out = make_topic(partitions=2), make_topic(prefix="out")
    before = [(f"k{i}", json.dumps({"n": i, "word": "before"})) for i in range(20)]
    produce(bootstrap, source, before)
    settings = settings_for(tmp_path, bootstrap, continuous_map={"topic": source,
                                                                  "out_topic": out})  # fmt: skip

    def written(n: int) -> Callable[[], bool]:
        return lambda: sum(topic_offsets(bootstrap, out).values()) >= n

    with running_pipeline(continuous, settings):
        wait_until(written(20), timeout=120, what="the backlog in the output topic")
        # Records sent while the query runs stream through without a new batch being planned.
        after = [(f"k{i}", json.dumps({"n": i, "word": "after"})) for i in range(20, 30)]
        produce(bootstrap, source, after)
        wait_until(written(30), timeout=60, what="the live records in the output topic")

    got = sorted(consume_topic(bootstrap, out))
    assert got == sorted((k, v.upper()) for k, v in before + after)
