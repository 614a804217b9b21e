"""The files input in CSV and parquet, its ``max_files_per_trigger``, and a partitioned
parquet output: run through the pipeline API, read back by Spark and pyarrow."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from eventlake.connectors import DeltaOutput, FilesInput, FilesOutput, Output
from eventlake.pipelines import Pipeline
from eventlake.testing import read_delta, run_available_now, settings_for, unique_name

pytestmark = pytest.mark.integration

SCHEMA = "id STRING, amount DOUBLE, day DATE"
Row = tuple[str, float, str]


def _landed(root: Path) -> list[Row]:
    rows = read_delta(root / "lake" / "bronze" / "rows").to_pylist()
    return sorted((r["id"], r["amount"], r["day"].isoformat()) for r in rows)


def _rows(file: int, n: int = 4) -> list[Row]:
    return [(f"f{file}-{i}", float(file * 10 + i), f"2026-01-0{1 + i % 2}") for i in range(n)]


def _csv(folder: Path, n: int, rows: list[Row]) -> None:
    lines = ["id,amount,day"] + [",".join(map(str, r)) for r in rows]
    (folder / f"part-{n}.csv").write_text("\n".join(lines) + "\n")


def _inbox(
    root: Path, files: int, per_file: int = 4, write: Callable[[Path, int, list[Row]], None] = _csv
) -> list[Row]:
    """``lake/inbox`` under ``root`` with ``files`` files written by ``write`` (CSV with the
    header ``id,amount,day``); returns every row written."""
    inbox = root / "lake" / "inbox"
    inbox.mkdir(parents=True)
    written = []
    for n in range(files):
        rows = _rows(n, per_file)
        write(inbox, n, rows)
        written += rows
    return written


def _one_flow(inp: FilesInput, output: Output | None = None) -> Pipeline:
    """A pipeline whose flow ``rows`` copies ``inp`` to ``output`` (bronze/rows)."""
    pipeline = Pipeline(unique_name("files").replace("-", "_"))
    pipeline.flow(name="rows", input=inp, output=output or DeltaOutput("bronze", "rows"))(
        lambda ctx, df: df
    )
    return pipeline


def test_csv_files_stream_with_their_header(spark: SparkSession, tmp_path: Path) -> None:
    def reordered(folder: Path, n: int, rows: list[Row]) -> None:
        lines = ["day,id,amount"] + [f"{day},{i},{amount}" for i, amount, day in rows]
        (folder / f"part-{n}.csv").write_text("\n".join(lines) + "\n")

    want = _inbox(tmp_path, files=3, write=reordered)
    # The header names the columns in another order than the schema: Spark maps by
    # position, so the schema follows the files.
    pipeline = _one_flow(FilesInput("inbox", "csv", "day DATE, id STRING, amount DOUBLE"))

    run_available_now(pipeline, settings_for(tmp_path))

    assert _landed(tmp_path) == sorted(want)


def test_parquet_files_stream(spark: SparkSession, tmp_path: Path) -> None:
    def parquet(folder: Path, n: int, rows: list[Row]) -> None:  # by pyarrow, not Spark
        table = pa.table({
            "id": [r[0] for r in rows],
            "amount": [r[1] for r in rows],
            "day": [datetime.fromisoformat(r[2]).date() for r in rows],
        })  # fmt: skip
        pq.write_table(table, folder / f"part-{n}.parquet")

    want = _inbox(tmp_path, files=3, write=parquet)
    pipeline = _one_flow(FilesInput("inbox", "parquet", SCHEMA))

    run_available_now(pipeline, settings_for(tmp_path))

    assert _landed(tmp_path) == sorted(want)


def test_max_files_per_trigger_bounds_each_batch(spark: SparkSession, tmp_path: Path) -> None:
    want = _inbox(tmp_path, files=5, per_file=3)
    pipeline = _one_flow(FilesInput("inbox", "csv", SCHEMA))
    settings = settings_for(tmp_path, **{pipeline.name: {"max_files_per_trigger": 2}})

    result = run_available_now(pipeline, settings)

    totals = result.flows[f"{pipeline.name}.rows"]
    assert (totals.batches, totals.input_rows) == (3, 15)  # 2 + 2 + 1 files
    assert _landed(tmp_path) == sorted(want)
    # The file source's log in the checkpoint: the files each batch read.
    log = tmp_path / "checkpoints" / pipeline.name / "rows" / "sources" / "0"
    per_batch = [
        [json.loads(line)["path"] for line in (log / str(b)).read_text().splitlines()[1:]]
        for b in range(3)
    ]
    assert [len(files) for files in per_batch] == [2, 2, 1]
    assert sorted(Path(f).name for files in per_batch for f in files) == sorted(
        f"part-{n}.csv" for n in range(5)
    )


def test_once_trigger_reads_everything_in_one_batch(spark: SparkSession, tmp_path: Path) -> None:
    from eventlake.run import run_pipeline

    want = _inbox(tmp_path, files=5, per_file=3)
    pipeline = _one_flow(FilesInput("inbox", "csv", SCHEMA))
    settings = settings_for(tmp_path, **{pipeline.name: {"max_files_per_trigger": 2}})

    # Spark's deprecated once trigger: one batch, ignoring the source's batch bound
    # (available-now keeps the bound: test_max_files_per_trigger_bounds_each_batch).
    result = run_pipeline(pipeline, settings, trigger="once")

    totals = result.flows[f"{pipeline.name}.rows"]
    assert (totals.batches, totals.input_rows) == (1, 15)
    assert _landed(tmp_path) == sorted(want)


def test_triggers_by_flow_are_over_the_pipelines_and_the_flows_own(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``pipelines.<p>.triggers`` sets one flow's trigger: over the pipeline's ``trigger``
    and over a trigger the flow's code declares; a run's ``trigger`` is over both."""
    from eventlake.run import run_pipeline

    want = _inbox(tmp_path, files=5, per_file=3)
    inbox = FilesInput("inbox", "csv", SCHEMA)
    pipeline = Pipeline(unique_name("triggers").replace("-", "_"))
    for name, declared in (("plain", None), ("configured", None), ("declared", "once"),
                           ("overridden", "once")):  # fmt: skip
        pipeline.flow(name=name, input=inbox, output=DeltaOutput("bronze", name),
                      trigger=declared)(lambda ctx, df: df)  # fmt: skip
    params = {"max_files_per_trigger": 2, "trigger": "available-now",
              "triggers": {"configured": "once", "overridden": "available-now"}}  # fmt: skip
    settings = settings_for(tmp_path, **{pipeline.name: params})

    result = run_pipeline(pipeline, settings)

    # available-now keeps the bound of 2 files a batch (3 batches); once reads all in one.
    batches = {name.split(".")[1]: totals.batches for name, totals in result.flows.items()}
    assert batches == {"plain": 3, "configured": 1, "declared": 1, "overridden": 3}
    for name in batches:
        rows = read_delta(tmp_path / "lake" / "bronze" / name).to_pylist()
        assert sorted((r["id"], r["amount"], r["day"].isoformat()) for r in rows) == sorted(want)
        commits = tmp_path / "checkpoints" / pipeline.name / name / "commits"
        assert len([c for c in commits.iterdir() if c.name.isdigit()]) == batches[name]

    again = settings_for(tmp_path / "again", **{pipeline.name: params})
    (tmp_path / "again" / "lake").mkdir(parents=True)
    (tmp_path / "again" / "lake" / "inbox").symlink_to(tmp_path / "lake" / "inbox")
    result = run_pipeline(pipeline, again, trigger="once")
    assert {t.batches for t in result.flows.values()} == {1}


def test_partitioned_parquet_output(spark: SparkSession, tmp_path: Path) -> None:
    rows = _inbox(tmp_path, files=1, per_file=6)
    output = FilesOutput("out/rows", "parquet", partition_by=("day",))
    pipeline = _one_flow(FilesInput("inbox", "csv", SCHEMA), output)

    run_available_now(pipeline, settings_for(tmp_path))

    out = tmp_path / "lake" / "out" / "rows"
    assert sorted(p.name for p in out.glob("day=*")) == ["day=2026-01-01", "day=2026-01-02"]
    for folder in out.glob("day=*"):
        day = folder.name.removeprefix("day=")
        in_folder = pq.read_table(list(folder.glob("*.parquet"))).column("id").to_pylist()
        assert sorted(in_folder) == sorted(r[0] for r in rows if r[2] == day)
    # Spark reads the folder through its _spark_metadata log, with the partition column.
    back = spark.read.parquet(str(out)).collect()
    assert sorted((r["id"], r["amount"], r["day"].isoformat()) for r in back) == sorted(rows)
    assert ds.dataset(out, format="parquet", partitioning="hive").count_rows() == len(rows)
