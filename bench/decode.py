"""JSON decoding alone: ``from_json`` against eventlake's decoders (``bytes``, ``arrow``),
same rows.

The golden events (``EVENTS``, all five fields as STRING) are cached in memory in one
partition per core, then decoded by each decoder in turn and written to Spark's ``noop``
sink, ``ROUNDS`` rounds; the first round is left out (warm-up) and the median rate of the
rest is reported. Each decoder's rows are compared with ``from_json``'s once, in full.

``python -m bench.decode`` prints one JSON line; :func:`measure_decode` runs it in a fresh
process.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import TYPE_CHECKING, Any

from bench.fresh import in_fresh_process

if TYPE_CHECKING:
    from eventlake.config.params import JsonDecoder

EVENTS = 1_000_000
ROUNDS = 5
DECODERS: tuple[JsonDecoder, ...] = ("spark", "bytes", "arrow")


def _run() -> dict[str, Any]:
    from pyspark.sql import functions as F

    from bench.golden import FIELDS, TEXT_SCHEMA, events
    from eventlake.config import Settings, SparkSettings
    from eventlake.session import get_spark
    from eventlake.transforms import parse_json

    cores = len(os.sched_getaffinity(0))
    spark = get_spark(Settings(spark=SparkSettings(master=f"local[{cores}]")))
    rows = [(i, value) for i, (_, value, _) in enumerate(events(EVENTS))]
    df = spark.createDataFrame(rows, "id LONG, value STRING").repartition(cores).cache()
    df.count()
    decoded = {d: parse_json(df, TEXT_SCHEMA, decoder=d).select("id", "data.*") for d in DECODERS}
    rates: dict[str, list[float]] = {d: [] for d in DECODERS}
    for _ in range(ROUNDS):
        for decoder, out in decoded.items():
            t0 = time.perf_counter()
            out.write.format("noop").mode("overwrite").save()
            rates[decoder].append(EVENTS / (time.perf_counter() - t0))
    spark_rows = decoded["spark"].select("id", *FIELDS)
    differing = 0
    for decoder in DECODERS[1:]:
        other = decoded[decoder].select("id", *FIELDS)
        differing += spark_rows.exceptAll(other).count() + other.exceptAll(spark_rows).count()
    return {
        "events": EVENTS,
        "cores": cores,
        "rows_per_second": {d: round(statistics.median(r[1:])) for d, r in rates.items()},
        "every_round": {d: [round(x) for x in r] for d, r in rates.items()},
        "differing_rows": differing,
        "null_fields": spark_rows.where(F.col("event_time").isNull()).count(),
    }


def measure_decode() -> dict[str, Any]:
    """Run this module in a fresh process; its JSON plus a Markdown section."""
    title = "## JSON decoding alone"
    result = in_fresh_process("bench.decode", title=title)
    if "error" in result:
        return result
    rates = result["rows_per_second"]
    result["markdown"] = [
        title,
        "",
        f"{result['events']:,} golden events cached in memory ({result['cores']} partitions), "
        "five STRING fields, decoded and written to Spark's noop sink; median of "
        f"{ROUNDS - 1} warm rounds. spark is `from_json`; bytes is `from_json` given each "
        "record's bytes (the default); arrow is pyarrow in bulk. Rows that differ from "
        f"`from_json`'s: {result['differing_rows']}.",
        "",
        "| decoder | rows/s | every round |",
        "|---|---|---|",
        *(
            f"| {d} | {rates[d]:,} | {', '.join(f'{x:,}' for x in result['every_round'][d])} |"
            for d in DECODERS
        ),
    ]
    return result


def main() -> None:
    print(json.dumps(_run()))


if __name__ == "__main__":
    main()
