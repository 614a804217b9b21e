"""Where the golden query's time goes: eventlake as shipped, once more with Spark's event log.

The run's timeline on one clock (epoch): process start, SparkSession up, the query's start
(pre-flight and planning before it), each micro-batch with Spark's own split
(``durationMs``) and the Spark stages its jobs ran (wall time, tasks, the tasks' summed run,
CPU, GC and shuffle-write time), the query's end and the process's exit. The event log
costs a little I/O; the timed rounds run without it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.batch_cost import PARTS
from bench.variants.eventlake_golden import write_config

PROGRESS = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
STARTED = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent"
#: A stage shown in the profile: at least this long (ms of wall time).
MIN_STAGE_MS = 50


def _epoch(value: Any) -> float:
    """An event's timestamp (ISO text or epoch ms) in epoch seconds."""
    if isinstance(value, (int, float)):
        return value / 1000
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _operators(rdds: list[dict[str, Any]]) -> str:
    """A stage's physical operators, source first (a streaming stage's name is 'start')."""
    names: list[str] = []
    for rdd in sorted(rdds, key=lambda r: int(r.get("RDD ID", 0))):
        scope = json.loads(rdd["Scope"])["name"] if rdd.get("Scope") else None
        if scope and not scope.startswith("WholeStageCodegen") and scope not in names:
            names.append(scope)
    return ", ".join(names) or "-"


def read_event_log(folder: Path) -> dict[str, Any]:
    """Batches (``durationMs``, start, rows) and stages (by batch) from an event log."""
    (log,) = [p for p in folder.iterdir() if p.is_file()]
    batches: dict[int, dict[str, Any]] = {}
    stage_batch: dict[int, int | None] = {}
    stages: dict[int, dict[str, Any]] = {}
    tasks: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    query_start: float | None = None
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event.get("Event")
        if kind == STARTED:
            query_start = query_start or _epoch(event["timestamp"])
        elif kind == PROGRESS:
            p = event["progress"]
            batches[int(p["batchId"])] = {
                "start": _epoch(p["timestamp"]),
                "rows": sum(int(src.get("numInputRows", 0)) for src in p.get("sources", [])),
                "ms": {k: int(p["durationMs"].get(k, 0)) for k in (*PARTS, "triggerExecution")},
            }
        elif kind == "SparkListenerJobStart":
            batch = (event.get("Properties") or {}).get("streaming.sql.batchId")
            for stage in event.get("Stage IDs", []):
                stage_batch[int(stage)] = int(batch) if batch is not None else None
        elif kind == "SparkListenerTaskEnd":
            m = event.get("Task Metrics") or {}
            t = tasks[int(event["Stage ID"])]
            t["run_ms"] += m.get("Executor Run Time", 0)
            t["cpu_ms"] += m.get("Executor CPU Time", 0) / 1e6
            t["gc_ms"] += m.get("JVM GC Time", 0)
            t["shuffle_write_ms"] += (m.get("Shuffle Write Metrics") or {}).get(
                "Shuffle Write Time", 0
            ) / 1e6
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            stages[int(info["Stage ID"])] = {
                "name": _operators(info.get("RDD Info", [])),
                "tasks": int(info["Number of Tasks"]),
                "start": info["Submission Time"] / 1000,
                "wall_ms": info["Completion Time"] - info["Submission Time"],
            }
    for sid, stage in stages.items():
        stage["batch"] = stage_batch.get(sid)
        stage.update({k: round(v) for k, v in tasks[sid].items()})
    return {
        "query_start": query_start,
        "batches": batches,
        "stages": [stages[s] for s in sorted(stages)],
    }


def profile_golden(bootstrap: str, topic: str, root: Path, logs: Path) -> dict[str, Any]:
    """Run the shipped golden variant once with the event log on; its timeline."""
    events = root / "eventlog"
    events.mkdir(parents=True)
    config = write_config(
        root / "profile.yaml",
        bootstrap,
        topic,
        root,
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            # One plain JSON file (Spark 4 rolls and compresses by default).
            "spark.eventLog.rolling.enabled": "false",
            "spark.eventLog.compress": "false",
        },
    )
    print("[bench] profile: eventlake as shipped, with Spark's event log ...", flush=True)
    started = time.time()
    with (logs / "profile.log").open("w") as err:
        proc = subprocess.run(
            [sys.executable, "-m", "bench.variants.eventlake_golden", str(config)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            check=True,
        )
    ended = time.time()
    report = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    spark = read_event_log(events)
    query_start = spark["query_start"] or report["session_at"]
    timeline: list[tuple[str, float]] = [
        ("Python start, imports, config", report["main_at"] - started),
        (
            "SparkSession (JVM start, jars; the pre-flight asks the broker meanwhile)",
            report["session_at"] - report["main_at"],
        ),
        (
            "the rest of the pre-flight, planning, until the query starts",
            query_start - report["session_at"],
        ),
    ]
    batches = spark["batches"]
    for n in sorted(batches):
        b = batches[n]
        timeline.append((f"batch {n} ({b['rows']:,} rows)", b["ms"]["triggerExecution"] / 1000))
    last_end = max(
        (b["start"] + b["ms"]["triggerExecution"] / 1000 for b in batches.values()),
        default=query_start,
    )
    timeline += [
        ("the query's stop and results", report["query_end_at"] - last_end),
        ("process exit (JVM shutdown)", ended - report["query_end_at"]),
    ]
    result: dict[str, Any] = {
        "process_seconds": round(ended - started, 2),
        "timeline": [{"phase": p, "seconds": round(s, 2)} for p, s in timeline],
        "batches": batches,
        "stages": spark["stages"],
    }
    result["markdown"] = _markdown(result)
    return result


def _markdown(result: dict[str, Any]) -> list[str]:
    lines = [
        "## Where the time goes: the golden query, eventlake as shipped",
        "",
        f"One more run with Spark's event log on ({result['process_seconds']} s whole "
        "process); phases on one clock:",
        "",
        "| phase | s |",
        "|---|---|",
        *(f"| {t['phase']} | {t['seconds']} |" for t in result["timeline"]),
        "",
        "Each batch as Spark splits it (ms):",
        "",
        "| batch | rows | " + " | ".join(PARTS) + " |",
        "|---|---|" + "---|" * len(PARTS),
    ]
    for n, b in sorted(result["batches"].items()):
        parts = " | ".join(str(b["ms"][k]) for k in PARTS)
        lines.append(f"| {n} | {b['rows']:,} | {parts} |")
    lines += [
        "",
        f"Spark stages of at least {MIN_STAGE_MS} ms (wall; the tasks' summed run, CPU, GC "
        "and shuffle-write time, ms):",
        "",
        "| batch | stage (operators) | tasks | wall | run | CPU | GC | shuffle write |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in result["stages"]:
        if s["wall_ms"] < MIN_STAGE_MS:
            continue
        batch = "-" if s["batch"] is None else s["batch"]
        lines.append(
            f"| {batch} | {s['name']} | {s['tasks']} | {s['wall_ms']} | {s.get('run_ms', 0)} "
            f"| {s.get('cpu_ms', 0)} | {s.get('gc_ms', 0)} | {s.get('shuffle_write_ms', 0)} |"
        )
    return lines
