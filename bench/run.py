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

from eventlake.config import KafkaSettings, Settings, SparkSettings
from eventlake.generator import generate_orders, order_records
from eventlake.kafka import EmbeddedKafkaBroker, create_topic, produce
from eventlake.queries import await_finished
from eventlake.session import get_spark
from eventlake.sinks import DeltaAppendSink
from eventlake.sources import KafkaSource, kafka_records
from eventlake.testing import free_port, read_delta

EVENTS = 200_000
RESULTS = Path(__file__).parent / "results"


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="eventlake-bench-") as tmp:
        root = Path(tmp)
        with EmbeddedKafkaBroker(port=free_port(), data_dir=root / "kafka") as broker:
            bootstrap = broker.bootstrap_servers
            create_topic(bootstrap, "orders", partitions=3)
            t0 = time.perf_counter()
            produce(bootstrap, "orders", order_records(generate_orders(EVENTS, seed=1)))
            produce_s = time.perf_counter() - t0

            spark = get_spark(Settings(spark=SparkSettings(master="local[2]")))
            source = KafkaSource(
                topics=("orders",),
                kafka=KafkaSettings(bootstrap_servers=bootstrap),
                max_offsets_per_trigger=100_000,
            )
            t0 = time.perf_counter()
            query = DeltaAppendSink(path=root / "bronze").start(
                kafka_records(source.read_stream(spark)),
                query_name="bench.bronze",
                checkpoint=root / "cp",
                trigger="available-now",
            )
            await_finished(query, timeout=1800)
            ingest_s = time.perf_counter() - t0
            rows = read_delta(root / "bronze").num_rows
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
