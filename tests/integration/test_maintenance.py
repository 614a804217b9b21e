"""Table maintenance you can see and run: a table's files, small files and last compaction
and VACUUM in `eventlake status` and /metrics, and `eventlake maintain` (dry run, then for
real) compacting it without changing a row a downstream flow reads."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from eventlake.config import load_settings
from eventlake.config.model import MaintenanceSettings
from eventlake.connectors import (
    DeltaInput,
    DeltaOutput,
    FanOut,
    KafkaInput,
    MergeDelta,
    kafka_records,
)
from eventlake.connectors.delta import TableState, maintain_table
from eventlake.connectors.delta.maintenance import (
    FILES_IN_CHECKSUM,
    FILES_IN_CHECKSUM_DEFAULT,
    FILES_LISTED,
    prepare_file_list,
)
from eventlake.connectors.delta.tables import ensure_delta_table
from eventlake.errors import Recovery, translate
from eventlake.kafka import produce
from eventlake.operations.maintain import maintain_pipeline
from eventlake.operations.status import table_reports
from eventlake.pipelines import Pipeline
from eventlake.pipelines.loader import load_pipelines
from eventlake.session import get_spark
from eventlake.storage import Location
from eventlake.testing import (
    read_delta,
    run_available_now,
    running_pipeline,
    settings_for,
    unique_name,
    wait_until,
)
from eventlake.testing.browser import rendered_dom
from tests.integration.cli_helpers import bronze_silver_module, run_cli, write_config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.integration

MODULE = bronze_silver_module("kept")


def _files(path: Path) -> int:
    return len(DeltaTable(str(path)).file_uris())


def _adds(path: Path) -> pa.Table:
    """The add actions of the table's current version (path, size_bytes, ...), by delta-rs."""
    return pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))


def test_maintain_compacts_and_status_shows_it(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2, prefix="kept")
    module = tmp_path / "kept.py"
    module.write_text(MODULE)
    off = {"enabled": False}  # the runs leave their small files for `maintain`
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, maintenance=off,
                       kept={"topic": topic})  # fmt: skip
    settings, registry = load_settings(cfg), load_pipelines([module])
    sent = []
    for run in range(3):  # three runs: three commits of small files in each table
        batch = [(f"k{run}-{i}", json.dumps({"run": run, "i": i})) for i in range(20)]
        produce(bootstrap, topic, batch)
        sent += batch
        run_available_now("kept", settings, registry=registry)  # in this test's Spark
    bronze, silver = tmp_path / "lake" / "bronze" / "kept", tmp_path / "lake" / "silver" / "kept"
    before = _files(bronze)
    assert before >= 3

    status = run_cli("--config", str(cfg), "status", "kept", "--module", str(module),
                     "--format", "json")  # fmt: skip
    tables = {t["table"]: t for t in json.loads(status.stdout)["tables"]}
    assert tables["bronze/kept"]["files"] == before
    assert tables["bronze/kept"]["small_files"] == before
    assert tables["bronze/kept"]["last_compact"] is None

    wide = {"COLUMNS": "250"}  # the tables' cells on one line each
    dry = run_cli("--config", str(cfg), "maintain", "kept", "--module", str(module), "--dry-run",
                  "--force", env=wide)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "would compact" in dry.stdout
    assert _files(bronze) == before  # nothing done

    done = run_cli("--config", str(cfg), "maintain", "kept", "--module", str(module), "--force",
                   env=wide)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert _files(bronze) == 1
    assert _files(silver) == 1
    assert sorted(r["key"] for r in read_delta(bronze).to_pylist()) == sorted(k for k, _ in sent)
    history = DeltaTable(str(bronze)).history()
    assert [c["operation"] for c in history if c["operation"] == "OPTIMIZE"] == ["OPTIMIZE"]
    assert "vacuum: 0 files removed (retention 168 h)" in done.stdout  # a week: Delta's default

    # A downstream flow reads the compaction as no data: the new rows only, each once.
    more = [(f"k3-{i}", json.dumps({"run": 3, "i": i})) for i in range(20)]
    produce(bootstrap, topic, more)
    run_available_now("kept", settings, registry=registry)
    copied = sorted(r["key"] for r in read_delta(silver).to_pylist())
    assert copied == sorted(k for k, _ in [*sent, *more])

    status = run_cli("--config", str(cfg), "status", "kept", "--module", str(module), env=wide)
    assert status.returncode == 0, status.stderr
    assert "bronze/kept" in status.stdout
    assert "files into 1" in status.stdout  # the last compaction, as the table shows it
    unknown = run_cli("--config", str(cfg), "maintain", "kept", "--module", str(module),
                      "--table", "gold/nothing")  # fmt: skip
    assert unknown.returncode == 1
    assert "writes no table gold/nothing" in unknown.stderr


def test_a_run_compacts_its_tables_between_batches_and_metrics_show_them(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=1, prefix="metered")
    pipeline = Pipeline(unique_name("metered").replace("-", "_"))

    @pipeline.flow(input=KafkaInput(), output=DeltaOutput("bronze", "metered"))
    def raw(ctx, df):  # type: ignore[no-untyped-def]
        return kafka_records(df).select("key", "value")

    @pipeline.flow(input=DeltaInput("bronze", "metered"), output=DeltaOutput("silver", "metered"))
    def copied(ctx, df):  # type: ignore[no-untyped-def]
        return df

    params = {"topic": topic, "trigger": "1 second", "maintenance": {"compact_min_files": 3}}
    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: params})
    bronze = tmp_path / "lake" / "bronze" / "metered"
    sent: list[str] = []
    with running_pipeline(pipeline, settings) as run:

        def compacted() -> bool:
            batch = [f"m{len(sent) + i}" for i in range(5)]
            produce(bootstrap, topic, [(k, "{}") for k in batch])
            sent.extend(batch)
            history = DeltaTable(str(bronze)).history() if bronze.exists() else []
            return any(c["operation"] == "OPTIMIZE" for c in history)

        wait_until(compacted, timeout=180, interval=1.0, what="a compaction of bronze")
        samples = run.metrics()
        files = {s.labels["table"]: s.value for s in samples["eventlake_table_files"]}
        assert files["bronze/metered"] >= 1
        assert "silver/metered" in files
        assert "eventlake_table_small_files" in samples
        record = run.status()
        assert {t["table"] for t in record["tables"]} >= {"bronze/metered", "silver/metered"}
    # Drained: every row once downstream, however often bronze was compacted under it.
    run_available_now(pipeline, settings)
    copied_keys = sorted(r["key"] for r in read_delta(tmp_path / "lake/silver/metered").to_pylist())
    assert copied_keys == sorted(sent)


BRONZE_ONLY = """
from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.pipelines import Pipeline

broken = Pipeline("broken")


@broken.flow(input=KafkaInput(), output=DeltaOutput("bronze", "broken"))
def raw(ctx, df):
    return kafka_records(df).select("key", "value")
"""


def test_a_failing_compaction_shows_in_status_metrics_and_the_dashboard(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A table's history holds only what maintenance did; what failed is the run's to tell:
    a compaction that cannot read a file the log lists is counted, its error shown, while
    the flow's appends go on."""
    topic = make_topic(partitions=1, prefix="broken")
    module = tmp_path / "broken.py"
    module.write_text(BRONZE_ONLY)
    registry = load_pipelines([module])
    off = write_config(tmp_path / "off.yaml", bootstrap, tmp_path, maintenance={"enabled": False},
                       broken={"topic": topic})  # fmt: skip
    for run in range(3):  # three commits of one small file each, left by runs without maintenance
        produce(bootstrap, topic, [(f"k{run}-{i}", "{}") for i in range(5)])
        run_available_now("broken", load_settings(off), registry=registry)
    bronze = tmp_path / "lake" / "bronze" / "broken"
    [gone, *_] = sorted(bronze.glob("*.parquet"))
    gone.unlink()  # a file the log still lists, removed behind Delta's back

    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path,
                       maintenance={"compact_min_files": 2},
                       broken={"topic": topic, "trigger": "1 second"})  # fmt: skip
    sent = 15
    with running_pipeline("broken", load_settings(cfg), registry=registry) as run:

        def failed() -> dict[str, Any] | None:
            nonlocal sent
            produce(bootstrap, topic, [(f"live-{sent}", "{}")])
            sent += 1
            [table] = [t for t in run.status()["tables"] if t["table"] == "bronze/broken"]
            return table if table["maintenance_failures"].get("compact") else None

        table = wait_until(failed, timeout=180, interval=1.0, what="a failed compaction")
        assert table["last_failure"]["kind"] == "compact"
        assert gone.name in table["last_failure"]["error"], table["last_failure"]
        samples = run.metrics()["eventlake_table_maintenance_failures"]
        counted = {(s.labels["table"], s.labels["kind"]): s.value for s in samples
                   if s.name.endswith("_total")}  # fmt: skip
        assert counted[("bronze/broken", "compact")] >= 1

        wide = {"COLUMNS": "400"}
        shown = run_cli("--config", str(cfg), "status", "broken", "--module", str(module),
                        env=wide)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"failed \d+x in this run, last \d+s ago: ", shown.stdout), shown.stdout
        page = rendered_dom(run.url, wait_ms=8000)
        cell = re.search(r'class="table-compact">([^<]*)<', page)
        assert cell is not None, page
        assert "x in this run" in cell.group(1), cell.group(1)
        # The appends went on: the log lists every record sent but the removed file's five
        # (its statistics: reading the table would fail on the missing file).
        wait_until(lambda: sum(_adds(bronze).column("num_records").to_pylist()) >= sent - 5,
                   timeout=60, what="the live records in bronze's log")  # fmt: skip
    assert all(c["operation"] != "OPTIMIZE" for c in DeltaTable(str(bronze)).history())
    # `eventlake maintain` fails the same way, with the same innermost cause.
    settings = load_settings(off)
    [done] = maintain_pipeline(registry.get("broken"), settings, get_spark(settings), force=True)
    [compaction] = [a for a in done.actions if a.kind == "compact"]
    assert compaction.error == table["last_failure"]["error"]


def _latest(target, source, batch):  # type: ignore[no-untyped-def]
    return (
        target.alias("t").merge(source.alias("s"), "t.key = s.key")
        .whenMatchedUpdateAll().whenNotMatchedInsertAll()
    )  # fmt: skip


def _last_optimize(path: Path) -> dict[str, Any]:
    return next(c for c in DeltaTable(str(path)).history() if c["operation"] == "OPTIMIZE")


def test_merge_targets_are_clustered_or_z_ordered_by_their_key(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A MERGE target's compaction lays its files out by the merge key: liquid clustering
    for a new unpartitioned table; Z-order for a partitioned one and for one created
    without clustering (Delta cannot cluster either)."""
    topic = make_topic(partitions=2, prefix="laid")
    pipeline = Pipeline(unique_name("laid").replace("-", "_"))
    ddl = "key STRING, bucket INT, n BIGINT"

    def latest(ctx, df, batch):  # type: ignore[no-untyped-def]
        n = F.get_json_object("value", "$.n").cast("long")
        rows = df.select(
            "key", (F.abs(F.hash("key")) % 3).cast("int").alias("bucket"), n.alias("n")
        )
        return rows.groupBy("key", "bucket").agg(F.max("n").alias("n"))

    def merge(layer_table: str, **layout: tuple[str, ...]) -> MergeDelta:
        return MergeDelta("silver", layer_table, _latest, ddl, prepare=latest, **layout)

    @pipeline.flow(input=KafkaInput(), output=FanOut(
        merge("clustered", cluster_by=("key",)),
        merge("partitioned", partition_by=("bucket",), cluster_by=("key",)),
        merge("unclustered", cluster_by=("key",)),
    ))  # fmt: skip
    def laid(ctx, df):  # type: ignore[no-untyped-def]
        return kafka_records(df)

    off = {"enabled": False}  # the runs leave their small files for maintain_pipeline
    settings = settings_for(
        tmp_path, bootstrap, **{pipeline.name: {"topic": topic, "maintenance": off}}
    )
    silver = tmp_path / "lake" / "silver"
    # A table that existed before its MergeDelta said how to lay it out: not clustered.
    ensure_delta_table(spark, silver / "unclustered", ddl)
    latest_n: dict[str, int] = {}
    for run in range(3):  # new keys each time: a MERGE adds files, rewrites none
        batch = [(f"k{run}-{i}", json.dumps({"n": run * 100 + i})) for i in range(40)]
        produce(bootstrap, topic, batch)
        latest_n.update({k: json.loads(v)["n"] for k, v in batch})
        run_available_now(pipeline, settings)

    done = maintain_pipeline(pipeline, settings, spark, force=True)
    compacted = {m.table: [a.detail for a in m.actions if a.kind == "compact"] for m in done}
    assert "Z-ordered by key" in compacted["silver/partitioned"][0]
    assert "Z-ordered by key" in compacted["silver/unclustered"][0]
    assert "Z-ordered" not in compacted["silver/clustered"][0]

    params = {name: _last_optimize(silver / name)["operationParameters"]
              for name in ("clustered", "partitioned", "unclustered")}  # fmt: skip
    assert json.loads(str(params["partitioned"]["zOrderBy"])) == ["key"]
    assert json.loads(str(params["unclustered"]["zOrderBy"])) == ["key"]
    assert json.loads(str(params["clustered"].get("zOrderBy", "[]"))) == []
    assert json.loads(str(params["clustered"]["clusterBy"])) == ["key"]
    assert DeltaTable(str(silver / "partitioned")).metadata().partition_columns == ["bucket"]
    for name in params:  # the layout changed no row: each key's latest n, once
        rows = read_delta(silver / name).to_pylist()
        assert sorted((r["key"], r["n"]) for r in rows) == sorted(latest_n.items())
    reports = {r["table"]: r for r in table_reports(pipeline, settings)}
    assert "Z-ordered by key" in reports["silver/partitioned"]["last_compact"]["did"]


def test_a_compaction_rewrites_the_small_files_only(spark: SparkSession, tmp_path: Path) -> None:
    """A file of small_file_bytes or more is left as it is (Delta's OPTIMIZE would rewrite
    every file under 1 GB: a compaction's work would grow with the table)."""
    path = tmp_path / "grown"
    rows = spark.range(0, 50_000).selectExpr("id", "uuid() AS u").coalesce(1)
    rows.write.format("delta").save(str(path))
    for i in range(3):
        tiny = spark.range(i, i + 1).selectExpr("id", "uuid() AS u").coalesce(1)
        tiny.write.format("delta").mode("append").save(str(path))
    small_bytes = 64 * 1024
    sizes = _adds(path).to_pydict()
    [big] = [p for p, n in zip(sizes["path"], sizes["size_bytes"], strict=True) if n >= small_bytes]

    settings = MaintenanceSettings(small_file_bytes=small_bytes, compact_min_files=2)
    done = maintain_table(spark, TableState(str(path), "t/grown", settings))
    assert [a.detail for a in done.actions if a.kind == "compact"] == ["3 files into 1"]
    after = _adds(path).column("path").to_pylist()
    assert big in after
    assert len(after) == 2
    assert len(read_delta(path)) == 50_003


def test_a_compaction_rewrites_its_earlier_output_only_once_the_small_files_fill_a_file(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Until the small files together make a file of small_file_bytes, a compaction rewrites
    only the batches' own files, not the file an earlier compaction wrote; once they would
    fill it, every small file goes into one."""
    path = tmp_path / "tiered"
    earlier_rows = spark.range(0, 5_000).selectExpr("id", "uuid() AS u").coalesce(1)
    earlier_rows.write.format("delta").save(str(path))
    [earlier] = _adds(path).to_pylist()
    for i in range(3):
        tiny = spark.range(10_000 + i, 10_001 + i).selectExpr("id", "uuid() AS u").coalesce(1)
        tiny.write.format("delta").mode("append").save(str(path))
    sizes = _adds(path).column("size_bytes")
    tiny_bytes = sum(sizes.to_pylist()) - earlier["size_bytes"]

    # The small files come to less than small_file_bytes; each batch's file is under a
    # sixteenth of it, the earlier compaction's is not.
    small = 4 * earlier["size_bytes"]
    assert max(sizes.to_pylist()) < small
    assert tiny_bytes < small // 16 <= earlier["size_bytes"]
    settings = MaintenanceSettings(small_file_bytes=small, compact_min_files=2)
    done = maintain_table(spark, TableState(str(path), "t/tiered", settings))
    assert [a.detail for a in done.actions if a.kind == "compact"] == ["3 files into 1"]
    paths = _adds(path).column("path")
    assert earlier["path"] in paths.to_pylist()
    assert len(paths) == 2

    # Now they fill one: both go into a single file.
    both = _adds(path).column("size_bytes")
    settings = MaintenanceSettings(small_file_bytes=sum(both.to_pylist()), compact_min_files=2)
    done = maintain_table(spark, TableState(str(path), "t/tiered", settings))
    assert [a.detail for a in done.actions if a.kind == "compact"] == ["2 files into 1"]
    assert len(DeltaTable(str(path)).file_uris()) == 1
    ids = sorted(r["id"] for r in read_delta(path).to_pylist())
    assert ids == [*range(5_000), 10_000, 10_001, 10_002]


def test_a_full_compaction_that_came_out_small_waits_for_the_files_to_fill_one_packed(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Merged small files shrink (Parquet packs rows tighter in one file), so small_file_bytes
    of batch files come out as a file under it. Counted as they were, the small files would
    pass small_file_bytes again at the next compaction, and that file would be rewritten
    whole each time until it grew past it; counted as packed as that compaction packed
    them, the next compactions leave it alone until they would fill a file. A later run
    (a new TableState) reads the packing from the table's history."""
    path = tmp_path / "packed"

    def append(first: int, files: int) -> None:
        for i in range(first, first + files):
            rows = spark.range(i * 200, (i + 1) * 200).selectExpr(
                "id", "concat('user-', CAST(id % 50 AS STRING), '@example.com') AS s"
            )
            rows.coalesce(1).write.format("delta").mode("append").save(str(path))

    append(0, 20)
    small = sum(_adds(path).column("size_bytes").to_pylist())
    settings = MaintenanceSettings(small_file_bytes=small, compact_min_files=2)
    state = TableState(str(path), "t/packed", settings)
    done = maintain_table(spark, state)
    assert [a.detail for a in done.actions if a.kind == "compact"] == ["20 files into 1"]
    [full] = _adds(path).to_pylist()
    assert small // 16 <= full["size_bytes"] < small

    append(20, 12)
    assert sum(_adds(path).column("size_bytes").to_pylist()) >= small
    done = maintain_table(spark, state)
    assert [a.detail for a in done.actions if a.kind == "compact"] == ["12 files into 1"]
    assert full["path"] in _adds(path).column("path").to_pylist()

    append(32, 40)
    later = TableState(str(path), "t/packed", settings)
    done = maintain_table(spark, later)
    assert [a.detail for a in done.actions if a.kind == "compact"] == ["42 files into 1"]
    assert _adds(path).column("size_bytes").to_pylist()[0] >= small
    assert sorted(r["id"] for r in read_delta(path).to_pylist()) == list(range(72 * 200))


def _jobs(spark: SparkSession, work: Callable[[], object]) -> int:
    """How many Spark jobs ``work()`` ran on this thread."""
    context = spark.sparkContext
    group = unique_name("jobs")
    context.setJobGroup(group, group)
    try:
        work()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    return len(context.statusTracker().getJobIdsForGroup(group))


def _spread_table(spark: SparkSession, path: Path, files: int) -> Callable[[], object]:
    """A table of ``files`` small files (over Delta's 50 listed in a checksum); returns
    an append of one more."""
    spark.range(files * 10).repartition(files).write.format("delta").save(str(path))
    one = spark.range(1)
    return lambda: one.write.format("delta").mode("append").save(str(path))


def _checksum(path: Path) -> dict[str, Any]:
    newest = DeltaTable(str(path)).version()
    return json.loads((path / "_delta_log" / f"{newest:020d}.crc").read_text())


@contextmanager
def _deltas_own_listing(spark: SparkSession) -> Iterator[None]:
    """Delta's own bound for listing files in a checksum (50) instead of eventlake's."""
    spark.conf.set(FILES_IN_CHECKSUM, str(FILES_IN_CHECKSUM_DEFAULT))
    try:
        yield
    finally:
        spark.conf.set(FILES_IN_CHECKSUM, str(FILES_LISTED))


def test_the_batch_after_a_compaction_does_not_rebuild_the_tables_state(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Delta lists a table's files in each commit's checksum only while it has at most 50;
    the commit after a compaction that brought it under 50 would rebuild the whole snapshot
    state (extra Spark jobs, ~2 s on 2 cores) inside the writer's batch."""
    settings = MaintenanceSettings(compact_min_files=2)
    assert spark.conf.get(FILES_IN_CHECKSUM) == str(FILES_LISTED)  # eventlake's session

    with _deltas_own_listing(spark):
        # Delta's OPTIMIZE alone: the first append after it runs more jobs than the next one.
        plain = tmp_path / "plain"
        append = _spread_table(spark, plain, 60)
        spark.sql(f"OPTIMIZE delta.`{plain}`")
        assert "allFiles" not in _checksum(plain)
        rebuilt, steady = _jobs(spark, append), _jobs(spark, append)
        assert rebuilt > steady

        # A commit came between (the compaction could not list the files): the state is
        # built by the compaction; the writer's next batch only collects the list from it.
        raced = tmp_path / "raced"
        append = _spread_table(spark, raced, 60)
        spark.sql(f"OPTIMIZE delta.`{raced}`")
        assert prepare_file_list(spark, Location(str(raced)), FILES_IN_CHECKSUM_DEFAULT)
        assert _jobs(spark, append) < rebuilt
        assert _jobs(spark, append) == steady
        assert not prepare_file_list(spark, Location(str(raced)), FILES_IN_CHECKSUM_DEFAULT)

    # A compaction of the run: its commit's checksum lists the table's files.
    path = tmp_path / "compacted"
    append = _spread_table(spark, path, 60)
    done = maintain_table(spark, TableState(str(path), "t/compacted", settings))
    assert [a.detail for a in done.actions if a.kind == "compact"] == ["60 files into 1"]
    listed = _checksum(path)["allFiles"]
    assert [f["path"] for f in listed] == _adds(path).column("path").to_pylist()
    assert _jobs(spark, append) == _jobs(spark, append) == steady
    assert len(read_delta(path)) == 602

    # eventlake's sessions list up to FILES_LISTED files: appends racing a compaction list
    # them, so does the compaction's commit after theirs, and no append after it rebuilds.
    for attempt in range(3):
        path = tmp_path / f"racing{attempt}"
        append = _spread_table(spark, path, 60)
        compaction = threading.Thread(target=spark.sql, args=(f"OPTIMIZE delta.`{path}`",))
        compaction.start()
        during = 0
        while compaction.is_alive():
            append()
            during += 1
        compaction.join()
        history = DeltaTable(str(path)).history()
        [optimized] = [h for h in history if h["operation"] == "OPTIMIZE"]
        if optimized["readVersion"] < optimized["version"] - 1:
            break  # an append committed while it ran
    else:
        pytest.fail("no append committed while OPTIMIZE ran, in 3 attempts")
    log = path / "_delta_log"
    for version in range(optimized["version"], DeltaTable(str(path)).version() + 1):
        assert "allFiles" in json.loads((log / f"{version:020d}.crc").read_text()), version
    assert [_jobs(spark, append) for _ in range(3)] == [steady] * 3
    assert len(read_delta(path)) == 600 + during + 3


def _commits(path: Path) -> list[int]:
    log = path / "_delta_log"
    return sorted(int(p.name[:20]) for p in log.glob("*.json") if not p.name.startswith("."))


def test_a_log_bounded_by_commits_keeps_what_every_reader_of_the_project_may_replay(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The log keeps its newest log_retention_commits commits, back to a checkpoint, and
    never a commit a stream reading the table (a checkpoint under checkpoints.root, of a
    pipeline not running) may replay: that stream goes on with every row once. A stream
    far behind on another table holds nothing back."""
    path, other = tmp_path / "lake" / "fast", tmp_path / "lake" / "other"
    ensure_delta_table(spark, path, "id BIGINT", checkpoint_interval=10)  # version 0
    ensure_delta_table(spark, other, "id BIGINT", checkpoint_interval=10)

    def append(table: Path, first: int, count: int = 1) -> None:
        for n in range(first, first + count):
            spark.range(n, n + 1).coalesce(1).write.format("delta").mode("append").save(str(table))

    root = tmp_path / "checkpoints"

    def catch_up(table: Path, checkpoint: Path, copy: Path) -> None:
        query = (spark.readStream.format("delta").load(str(table)).writeStream.format("delta")
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
                 .start(str(copy)))  # fmt: skip
        assert query.awaitTermination(120)

    append(other, 0)
    catch_up(other, root / "p2" / "slow", tmp_path / "slow_copy")
    append(other, 1, 40)  # the slow reader stays at version 1 of another table
    append(path, 0, 25)  # versions 1-25
    reader, copy = root / "p1" / "copy", tmp_path / "copy"
    catch_up(path, reader, copy)  # it may replay from version 25 or 26
    elsewhere = tmp_path / "elsewhere" / "copy"  # a stream whose checkpoint is not under root
    catch_up(path, elsewhere, tmp_path / "elsewhere_copy")
    append(path, 25, 25)  # versions 26-50
    settings = MaintenanceSettings(log_retention_commits=5, compact_min_files=1000)
    state = TableState(str(path), "lake/fast", settings)

    done = maintain_table(spark, state, checkpoints_root=Location(root))

    # Commits 46-50 are the newest five; the reader needs 25 on: the log starts at the
    # checkpoint at or before 25, which Delta wrote at version 20.
    [trimmed] = [a for a in done.actions if a.kind == "trim"]
    assert trimmed.error is None
    assert trimmed.detail.endswith("log files of versions 0-19 removed")
    assert _commits(path) == list(range(20, 51))
    catch_up(path, reader, copy)
    assert sorted(r["id"] for r in read_delta(copy).to_pylist()) == list(range(50))

    append(path, 50)  # version 51; the reader's next batch reads it
    catch_up(path, reader, copy)
    done = maintain_table(spark, state, checkpoints_root=Location(root))

    # It may replay from 50 now: the newest five (47-51) decide, from the checkpoint at 40.
    [trimmed] = [a for a in done.actions if a.kind == "trim"]
    assert trimmed.detail.endswith("log files of versions 20-39 removed")
    assert _commits(path) == list(range(40, 52))
    assert sorted(r["id"] for r in read_delta(copy).to_pylist()) == list(range(51))
    assert sorted(r["id"] for r in read_delta(path).to_pylist()) == list(range(51))
    assert spark.read.format("delta").load(str(path)).count() == 51
    append(path, 51)
    assert spark.read.format("delta").load(str(path)).count() == 52
    with pytest.raises(Exception, match=r"(?i)version|log"):
        spark.read.format("delta").option("versionAsOf", 30).load(str(path)).count()

    # The stream the table's maintenance could not see cannot resume; it is told how to
    # start over, and a restart would not help.
    with pytest.raises(StreamingQueryException) as failed:
        catch_up(path, elsewhere, tmp_path / "elsewhere_copy")
    error = translate(failed.value, in_query=True)
    assert error.spark_condition is not None
    assert "eventlake checkpoint reset PIPELINE.FLOW --yes" in str(error)
    assert error.recovery is Recovery.FATAL
