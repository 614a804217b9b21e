"""PyFlink SQL: the golden query as a HOP window (runs in the bench-only venv).

``python flink_sql.py BOOTSTRAP TOPIC OUT CONNECTOR_JAR``. A bounded read up to the
offsets at start; a bounded run flushes every window at the end, so the check keeps the
windows the final watermark closes.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from pyflink.table import EnvironmentSettings, TableEnvironment


def main() -> None:
    bootstrap, topic, out, jar = sys.argv[1:5]
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t0 = time.perf_counter()  # the JVM is up: query time starts, as in the Spark variants
    conf = env.get_config()
    conf.set("pipeline.jars", Path(jar).resolve().as_uri())
    conf.set("parallelism.default", "2")
    conf.set("table.local-time-zone", "UTC")
    env.execute_sql(f"""
        CREATE TABLE events (
            user_id STRING, event_id STRING, event_type STRING, page STRING,
            event_time TIMESTAMP_LTZ(3),
            WATERMARK FOR event_time AS event_time - INTERVAL '10' MINUTE
        ) WITH (
            'connector' = 'kafka', 'topic' = '{topic}',
            'properties.bootstrap.servers' = '{bootstrap}',
            'properties.group.id' = 'flink-bench',
            'scan.startup.mode' = 'earliest-offset',
            'scan.bounded.mode' = 'latest-offset',
            'format' = 'json', 'json.timestamp-format.standard' = 'ISO-8601'
        )""")
    env.execute_sql(f"""
        CREATE TABLE events_agg (
            window_start TIMESTAMP(3), window_end TIMESTAMP(3), user_id STRING, events BIGINT
        ) WITH ('connector' = 'filesystem', 'path' = '{out}/events_agg', 'format' = 'csv')""")
    env.execute_sql("""
        INSERT INTO events_agg
        SELECT window_start, window_end, user_id, COUNT(*) AS events
        FROM TABLE(HOP(TABLE events, DESCRIPTOR(event_time), INTERVAL '5' MINUTE,
                       INTERVAL '10' MINUTE))
        GROUP BY window_start, window_end, user_id""").wait()
    query_s = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "rows_in": None,
                "batches": None,
                "query_seconds": round(query_s, 2),
                "output": f"{out}/events_agg",
                "format": "csv",
            }
        )
    )


if __name__ == "__main__":
    main()
