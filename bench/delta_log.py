"""What a long ``_delta_log`` costs Spark's Delta operations on a local filesystem.

Every Delta operation of Spark on a local (or HDFS) table lists ``_delta_log`` from a
version: the filesystem has no listing from a name. Delta's log store lists the whole folder
and Hadoop's local listing looks up each file; eventlake's (``ListByNameLogStore``) reads
the names and looks up the newest only. On a local filesystem each commit leaves three
files there (the commit, Delta's checksum and Hadoop's hidden checksum of it; four with
Hadoop's default FileContext) for as long as the log retention keeps it.

For each count of older commits the table's log is given (a real table whose newest
version is a checkpoint at that version, preceded by that many commits' files: Spark lists
them and reads none, as with any commit older than the newest checkpoint), this times a
batch read (``count()``) and a one-row append, :data:`ROUNDS` times each, in one session
per log store.

``python -m bench.delta_log`` writes ``bench/results/delta-log.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fresh import in_fresh_process
from bench.run import machine, machine_line, write_results
from eventlake.session import LOCAL_FILE_CONTEXT, LOCAL_LOG_STORE_CONF

#: Older commits (none, then 1, 7 and 30 days of commits at a 10-second trigger) and the
#: files each left (three with eventlake's session settings).
CASES = ((0, 3), (8_640, 3), (60_480, 3), (259_200, 3))
#: The log stores compared: eventlake's session as shipped, and Delta's own for local tables.
STORES = {"eventlake": {}, "delta": {LOCAL_LOG_STORE_CONF: "io.delta.storage.HDFSLogStore"}}
ROUNDS = 5
AB_ROUNDS = 15
#: Hadoop's default for what eventlake's session sets to leave three files a commit.
SPARK_DEFAULTS = {LOCAL_FILE_CONTEXT: "org.apache.hadoop.fs.local.LocalFs"}
#: The files a commit leaves in ``_delta_log`` on a local filesystem, by Spark's defaults.
COMMIT_FILES = ("{v}.json", "{v}.crc", ".{v}.crc.crc", ".{v}.json.crc")


def padded_table(spark: Any, path: Path, older: int, per_commit: int) -> int:
    """A table at ``path`` whose newest version, ``older``, is a checkpoint preceded by
    ``older`` commits' files (``per_commit`` each); the number of files in its log."""
    from deltalake import DeltaTable

    spark.range(1000).write.format("delta").save(str(path))
    DeltaTable(str(path)).create_checkpoint()
    log = path / "_delta_log"
    first, newest = f"{0:020d}", f"{older:020d}"
    for suffix in (".json", ".crc", ".checkpoint.parquet"):
        if (log / f"{first}{suffix}").exists() and first != newest:
            (log / f"{first}{suffix}").rename(log / f"{newest}{suffix}")
    for hidden in log.glob(".*.crc"):
        hidden.unlink()
    last = json.loads((log / "_last_checkpoint").read_text())
    (log / "_last_checkpoint").write_text(json.dumps({**last, "version": older}))
    for version in range(older):
        for name in COMMIT_FILES[:per_commit]:
            (log / name.format(v=f"{version:020d}")).touch()
    return sum(1 for _ in log.iterdir())


def measure(
    cases: tuple[tuple[int, int], ...], conf: dict[str, str] | None = None, rounds: int = ROUNDS
) -> list[dict[str, Any]]:
    from eventlake.config.loader import settings_from_dict
    from eventlake.session import get_spark

    root = Path(tempfile.mkdtemp(prefix="eventlake-delta-log-"))
    try:
        spark = get_spark(settings_from_dict({
            "lake": {"root": str(root / "lake")}, "checkpoints": {"root": str(root / "ck")},
            "spark": {"conf": conf or {}},
        }))  # fmt: skip
        warm = root / "warm-up"
        for _ in range(3):  # the JVM's first Delta operations, not measured
            spark.range(1).write.format("delta").mode("append").save(str(warm))
            spark.read.format("delta").load(str(warm)).count()
        rows = []
        for older, per_commit in cases:
            path = root / f"t{older}-{per_commit}"
            files = padded_table(spark, path, older, per_commit)
            reads, appends = [], []
            for _ in range(rounds):
                start = time.perf_counter()
                spark.read.format("delta").load(str(path)).count()
                reads.append(time.perf_counter() - start)
                start = time.perf_counter()
                spark.range(1).write.format("delta").mode("append").save(str(path))
                appends.append(time.perf_counter() - start)
            first_append = f"{older + 1:020d}."
            written = sum(1 for p in (path / "_delta_log").iterdir()
                          if p.name.lstrip(".").startswith(first_append))  # fmt: skip
            rows.append({"older_commits": older, "files_per_commit": per_commit,
                         "log_files": files, "files_an_append_wrote": written,
                         "read_s": round(statistics.median(reads), 3),
                         "append_s": round(statistics.median(appends), 3)})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
            shutil.rmtree(path)
        return rows
    finally:
        shutil.rmtree(root, ignore_errors=True)


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Spark's Delta operations against the length of `_delta_log` (local filesystem)",
        "",
        f"{machine_line(result)} A batch read (`count()`) and a one-row append, median of "
        f"{ROUNDS}, on a table whose log holds the files of that many older commits, with "
        "Delta's log store for local tables (it lists the whole folder, looking up each file) "
        "and eventlake's (names first, then a lookup of the newest only); one session each "
        "(`python -m bench.delta_log`).",
        "",
        "| older commits | at a 10 s trigger | files in `_delta_log` | read, Delta's store "
        "| read, eventlake's | append, Delta's store | append, eventlake's |",
        "|---|---|---|---|---|---|---|",
    ]

    def s(r: dict[str, Any], key: str) -> str:
        return f"{r[key]:.3f} s" if key in r else "-"

    delta = {r["older_commits"]: r for r in result["stores"]["delta"].get("rows", [])}
    for row in result["stores"]["eventlake"].get("rows", []):
        theirs = delta.get(row["older_commits"], {})
        days = row["older_commits"] * 10 / 86_400
        lines.append(f"| {row['older_commits']:,} | {days:.0f} days | {row['log_files']:,} | "
                     f"{s(theirs, 'read_s')} | {s(row, 'read_s')} | "
                     f"{s(theirs, 'append_s')} | {s(row, 'append_s')} |")  # fmt: skip
    for name, store in result["stores"].items():
        if "error" in store:
            lines.append(f"\n{name}'s log store: failed: {store['error']}")
    lines += [
        "",
        f"A new table, median of {AB_ROUNDS} in a fresh process each, with eventlake's "
        "session settings against Hadoop's default for the local "
        "FileContext (`python -m bench.delta_log --commit-cost eventlake|spark`):",
        "",
        "| session | files a commit leaves in `_delta_log` | read | append |",
        "|---|---|---|---|",
    ]
    for name, row in result["commit_cost"].items():
        if "error" in row:
            lines.append(f"| {name} | failed: {row['error']} | | |")
            continue
        lines.append(f"| {name} | {row['files_an_append_wrote']} | {row['read_s']:.3f} s | "
                     f"{row['append_s']:.3f} s |")  # fmt: skip
    return "\n".join(lines) + "\n"


def commit_cost(session: str) -> dict[str, Any]:
    """A new table's read and append under ``session``'s settings, and the files each
    commit leaves, in this process (a session of its own)."""
    conf = SPARK_DEFAULTS if session == "spark" else None
    return measure(((0, 1),), conf, rounds=AB_ROUNDS)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commit-cost", choices=("eventlake", "spark"))
    parser.add_argument("--store", choices=tuple(STORES))
    args = parser.parse_args()
    if args.commit_cost:
        print(json.dumps(commit_cost(args.commit_cost)))
        return
    if args.store:
        print(json.dumps({"rows": measure(CASES, STORES[args.store])}))
        return
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result: dict[str, Any] = {"at": at, "machine": machine()}
    result["stores"] = {
        name: in_fresh_process("bench.delta_log", "--store", name, title=name) for name in STORES
    }
    result["commit_cost"] = {
        name: in_fresh_process("bench.delta_log", "--commit-cost", name, title=name)
        for name in ("eventlake", "spark")
    }
    write_results("delta-log", result, markdown(result))


if __name__ == "__main__":
    main()
