"""`make bench`: seed 002's golden query side by side, and eventlake's batch cost and latency.

One embedded broker, one topic of N preloaded events (default 1,000,000, 3 partitions).
Each system runs the golden query in its own process over that topic; the bench records
rows in, rows out, query time and whole-process time, and checks that every system emits
exactly the windows the final watermark closes, as counted in Python from the produced
events. Results: bench/results/golden.json and golden.md. A measurement, never a timed test.

``python -m bench.run [--events N] [--only name,name] [--skip-latency]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.golden import Expected, events
from bench.variants.eventlake_golden import write_config
from eventlake.jars import FLINK_BENCH_JARS, jar_files
from eventlake.kafka import EmbeddedKafkaBroker, create_topic, produce
from eventlake.testing import free_port

UTC = timezone.utc  # datetime.UTC is Python 3.11+

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
REPO = HERE.parent
BENCH_PYTHON = REPO / ".cache" / "bench-venv" / "bin" / "python"
TOPIC = "golden"


@dataclass
class Outcome:
    system: str
    setting: str
    process_seconds: float
    query_seconds: float | None = None
    rows_in: int | None = None
    rows_out: int | None = None
    batches: int | None = None
    closed_windows: int | None = None
    matches: bool = False
    mismatch: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _variants(bootstrap: str, root: Path) -> dict[str, tuple[str, str, list[str]]]:
    """name -> (system, setting, command)."""
    py = sys.executable
    root.mkdir(parents=True, exist_ok=True)

    def eventlake(name: str, *overrides: str) -> list[str]:
        config = write_config(root / f"{name}.yaml", bootstrap, TOPIC, root / name)
        sets = [a for o in overrides for a in ("--set", o)]
        return [py, "-m", "bench.variants.eventlake_golden", str(config), *sets]

    [flink_jar] = jar_files(FLINK_BENCH_JARS)
    return {
        "eventlake": ("eventlake", "as shipped (defaults)", eventlake("eventlake")),
        "eventlake-tuned": (
            "eventlake",
            "hand-tuned: max_offsets_per_trigger=1,000,000",
            eventlake("eventlake-tuned", "pipelines.golden.max_offsets_per_trigger=1000000"),
        ),
        "eventlake-from-json": (
            "eventlake",
            "Spark's from_json decoding: json_decoder=spark",
            eventlake("eventlake-from-json", "pipelines.golden.json_decoder=spark"),
        ),
        "eventlake-arrow": (
            "eventlake",
            "the arrow JSON decoder: json_decoder=arrow",
            eventlake("eventlake-arrow", "pipelines.golden.json_decoder=arrow"),
        ),
        "eventlake-no-archive": (
            "eventlake",
            "without the JVM class-data archive: spark.class_archive=false",
            eventlake("eventlake-no-archive", "spark.class_archive=false"),
        ),
        "eventlake-min-partitions": (
            "eventlake",
            "the scan in balanced tasks: min_partitions=auto",
            eventlake("eventlake-min-partitions", "pipelines.golden.min_partitions=auto"),
        ),
        "eventlake-10k": (
            "eventlake",
            "the previous default: max_offsets_per_trigger=10,000",
            eventlake("eventlake-10k", "pipelines.golden.max_offsets_per_trigger=10000"),
        ),
        "spark": (
            "plain PySpark",
            "Spark's defaults (seed 002 as written)",
            [py, "-m", "bench.variants.plain_spark", bootstrap, TOPIC, str(root / "spark")],
        ),
        "spark-tuned": (
            "plain PySpark",
            "tuned: shuffle partitions = cores, RocksDB",
            [py, "-m", "bench.variants.plain_spark", bootstrap, TOPIC, str(root / "spark-tuned"),
             "--tuned"],
        ),
        "flink": (
            "PyFlink SQL",
            "HOP window, parallelism 2, CSV file sink",
            [str(BENCH_PYTHON), str(HERE / "variants" / "flink_sql.py"), bootstrap, TOPIC,
             str(root / "flink"), str(flink_jar)],
        ),
        "quix": (
            "Quix Streams",
            "hopping_window().count().final(), one process",
            [str(BENCH_PYTHON), str(HERE / "variants" / "quix.py"), bootstrap, TOPIC,
             str(root / "quix")],
        ),
    }  # fmt: skip


#: Variants run once whatever --repeats says: slow, and only there to show the old default.
ONCE = ("eventlake-10k",)


def median_run(outcomes: list[Outcome]) -> Outcome:
    """The run with the median whole-process time, with every run's times in ``extra``;
    it matches only if every run matched."""
    ranked = sorted(outcomes, key=lambda o: o.process_seconds)
    median = ranked[(len(ranked) - 1) // 2]
    median.extra["runs"] = [
        {"process_seconds": o.process_seconds, "query_seconds": o.query_seconds} for o in outcomes
    ]
    failed = [o for o in outcomes if not o.matches]
    if failed:
        median.matches = False
        median.mismatch = failed[0].mismatch
    return median


def _rows(report: dict[str, Any]) -> list[tuple[datetime, str, int]]:
    """The (window start, user, count) rows a system wrote, read without that system."""
    fmt, out = report["format"], Path(report["output"])
    if fmt == "delta":
        from deltalake import DeltaTable

        table = DeltaTable(str(out)).to_pyarrow_table(columns=["window_start", "user_id", "events"])
        return [
            (r["window_start"].replace(tzinfo=UTC), r["user_id"], int(r["events"]))
            for r in table.to_pylist()
        ]
    if fmt == "csv":
        rows = []
        for part in sorted(
            p for p in out.rglob("*") if p.is_file() and not p.name.endswith(".crc")
        ):
            for line in part.read_text().splitlines():
                start, _end, user, count = (f.strip('"') for f in line.split(","))
                rows.append((datetime.fromisoformat(start).replace(tzinfo=UTC), user, int(count)))
        return rows
    return [
        (datetime.fromtimestamp(r["start"] / 1000, UTC), r["user_id"], int(r["events"]))
        for r in map(json.loads, out.read_text().splitlines())
    ]


def _run(
    name: str,
    system: str,
    setting: str,
    cmd: list[str],
    expected: Expected,
    logs: Path,
    round_: int = 1,
) -> Outcome:
    print(f"[bench] {name} (round {round_}): {setting} ...", flush=True)
    log = logs / f"{name}-{round_}.log"
    t0 = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO)
    process_s = time.perf_counter() - t0
    outcome = Outcome(system, setting, round(process_s, 2))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        outcome.mismatch = f"exit {proc.returncode}; see {log}"
        print(f"[bench] {name}: FAILED ({outcome.mismatch})", flush=True)
        return outcome
    report = json.loads(lines[-1])
    rows = _rows(report)
    outcome.query_seconds = report["query_seconds"]
    outcome.batches = report.get("batches")
    outcome.rows_out = len(rows)
    # A bounded run flushes every window: each event is in two sliding windows.
    outcome.rows_in = report.get("rows_in") or None
    per_key = name == "quix"
    closed = expected.closed(rows, per_key=per_key)
    wanted = expected.per_key if per_key else expected.counts
    outcome.closed_windows = len(closed)
    missing = {w: c for w, c in wanted.items() if closed.get(w) != c}
    extra = {w: c for w, c in closed.items() if w not in wanted}
    outcome.matches = not missing and not extra
    if not outcome.matches:
        outcome.mismatch = (
            f"{len(missing)} closed window(s) missing or wrong, {len(extra)} unexpected; "
            f"first: {next(iter(missing.items()), None) or next(iter(extra.items()))}"
        )
    print(
        f"[bench] {name}: process {outcome.process_seconds:.1f} s, query "
        f"{outcome.query_seconds} s, {outcome.rows_out} rows out, closed windows "
        f"{'match' if outcome.matches else 'DIFFER: ' + str(outcome.mismatch)}",
        flush=True,
    )
    return outcome


def machine() -> dict[str, Any]:
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
         if ln.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    mem_kb = next(
        int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
        if ln.startswith("MemTotal")
    )  # fmt: skip
    return {
        "cores": len(os.sched_getaffinity(0)),
        "cpu": cpu,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "os": platform.platform(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--only", default="", help="comma-separated variant names")
    parser.add_argument(
        "--skip-latency",
        action="store_true",
        help="golden variants only: no profile, decode, batch cost or latency",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="runs of each variant; the median is reported"
    )
    args = parser.parse_args()
    RESULTS.mkdir(exist_ok=True)
    logs = RESULTS / "logs"
    logs.mkdir(exist_ok=True)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results: dict[str, Any] = {
        "machine": machine(),
        "events": args.events,
        "at": at,
        "repeats": args.repeats,
    }
    with tempfile.TemporaryDirectory(prefix="eventlake-bench-") as tmp:
        root = Path(tmp)
        with EmbeddedKafkaBroker(port=free_port(), data_dir=root / "kafka") as broker:
            bootstrap = broker.bootstrap_servers
            create_topic(bootstrap, TOPIC, partitions=3)
            truth: list[tuple[str, datetime]] = []

            def records() -> Any:
                for key, value, t in events(args.events):
                    truth.append((key, t))
                    yield key, value

            t0 = time.perf_counter()
            produced = produce(bootstrap, TOPIC, records())
            print(f"[bench] produced {produced} events in {time.perf_counter() - t0:.1f} s")
            # The broker's log is still in dirty pages: written back now, not during
            # whichever run comes first.
            os.sync()
            expected = Expected.of(truth)
            results["closed_windows_expected"] = len(expected.counts)
            results["final_watermark"] = expected.watermark.isoformat()
            only = [v for v in args.only.split(",") if v]
            golden: dict[str, Any] = {}
            names = [n for n in _variants(bootstrap, root) if not only or n in only]
            runs: dict[str, list[Outcome]] = {n: [] for n in names}
            # Rounds, not back-to-back repeats: a slow minute of the machine hits every
            # system once instead of one system's every run. Each round starts one later
            # in the list, so no system always follows the same one.
            for i in range(args.repeats):
                variants = _variants(bootstrap, root / f"round{i + 1}")
                shift = i % len(names)
                for name in names[shift:] + names[:shift]:
                    if i and name in ONCE:
                        continue
                    system, setting, cmd = variants[name]
                    runs[name].append(_run(name, system, setting, cmd, expected, logs, i + 1))
            golden = {name: asdict(median_run(outcomes)) for name, outcomes in runs.items()}
            results["golden"] = golden
            if not args.skip_latency:
                from bench.batch_cost import measure_batch_cost
                from bench.decode import measure_decode
                from bench.latency import measure_latency
                from bench.medallion import measure_medallion
                from bench.profile import profile_golden

                results["profile"] = profile_golden(bootstrap, TOPIC, root / "profile", logs)
                results["decode"] = measure_decode()
                results["batch_cost"] = measure_batch_cost(bootstrap, root / "cost")
                results["latency"] = measure_latency(bootstrap, root / "latency")
                results["medallion"] = measure_medallion(bootstrap, root / "medallion")
    write_results("golden", results, markdown(results))


def write_results(stem: str, results: dict[str, Any], text: str) -> None:
    """``bench/results/<stem>.json`` and ``<stem>.md`` (``text``), which is printed too."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (RESULTS / f"{stem}.md").write_text(text)
    print(text)


def machine_line(results: dict[str, Any]) -> str:
    """When and on what ``results`` (with ``at`` and ``machine``) were measured."""
    m = results["machine"]
    return (f"{results['at']}: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, "
            f"Python {m['python']}.")  # fmt: skip


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# eventlake benchmark",
        "",
        f"{machine_line(results)} Seed 002's golden query over {results['events']:,} JSON "
        "events preloaded in a 3-partition topic of the embedded broker; each system in its "
        f"own process, {results.get('repeats', 1)} rounds, each starting one system later "
        "(the slow 10,000-offset variant: one); the median run by whole-process time is "
        "shown. Whole process: from process start to exit (JVM start included). Query: "
        "from the engine up (SparkSession, Flink's TableEnvironment; Quix: the "
        "Application) to the last result written.",
        "",
        "| system | setting | whole process (s) | query (s) | every run: process / query (s) "
        "| batches | rows in | rows out | closed windows | output |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in results.get("golden", {}).values():
        check = "same as expected" if o["matches"] else f"**differs**: {o['mismatch']}"
        every = ", ".join(
            f"{r['process_seconds']} / {r['query_seconds']}" for r in o["extra"].get("runs", [])
        )
        lines.append(
            f"| {o['system']} | {o['setting']} | {o['process_seconds']} | {o['query_seconds']} "
            f"| {every} "
            f"| {o['batches'] if o['batches'] is not None else '-'} "
            f"| {o['rows_in'] if o['rows_in'] is not None else '-'} | {o['rows_out']} "
            f"| {o['closed_windows']} | {check} |"
        )
    lines += [
        "",
        f"Expected: {results.get('closed_windows_expected')} windows closed by the final "
        f"watermark ({results.get('final_watermark')}), counted in Python from the produced "
        "events. Every system's output is compared with it, window by window.",
    ]
    for section in ("profile", "decode", "batch_cost", "latency", "medallion"):
        if section in results:
            lines += ["", *results[section]["markdown"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
