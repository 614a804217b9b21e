"""`make bench`: Kafka -> Delta bronze ingest throughput on the embedded broker.

Writes bench/results/kafka_to_delta.json. A measurement, never a timed test.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.generator import generate_orders, order_records
from eventlake.kafka import EmbeddedKafkaBroker, create_topic, produce
from eventlake.pipelines import FlowContext, Pipeline
from eventlake.run import run_pipeline
from eventlake.session import get_spark
from eventlake.testing import free_port, read_delta, settings_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

EVENTS = 200_000
RESULTS = Path(__file__).parent / "results"

ingest = Pipeline("bench")


@ingest.flow(input=KafkaInput(), output=DeltaOutput("bronze", "orders"))
def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Every Kafka record as received."""
    return kafka_records(df)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="eventlake-bench-") as tmp:
        root = Path(tmp)
        with EmbeddedKafkaBroker(port=free_port(), data_dir=root / "kafka") as broker:
            bootstrap = broker.bootstrap_servers
            create_topic(bootstrap, "orders", partitions=3)
            t0 = time.perf_counter()
            produce(bootstrap, "orders", order_records(generate_orders(EVENTS, seed=1)))
            produce_s = time.perf_counter() - t0

            settings = settings_for(
                root, bootstrap, bench={"topic": "orders", "max_offsets_per_trigger": 100_000}
            )
            spark = get_spark(settings)
            t0 = time.perf_counter()
            run_pipeline(ingest, settings, trigger="available-now")
            ingest_s = time.perf_counter() - t0
            rows = read_delta(settings.lake.table_path("bronze", "orders")).num_rows
            spark.stop()
    result = {
        "benchmark": "kafka_to_delta_bronze",
        "events": EVENTS,
        "rows_in_table": rows,
        "produce_seconds": round(produce_s, 2),
        "produce_events_per_second": round(EVENTS / produce_s),
        "ingest_seconds": round(ingest_s, 2),
        "ingest_rows_per_second": round(rows / ingest_s),
        "spark_master": "local[2]",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "kafka_to_delta.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
