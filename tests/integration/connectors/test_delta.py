"""Delta input and output options end to end: starting version and timestamp,
skipChangeCommits, the change data feed, partitioned writes, merge_schema and complete
mode; tables read back with delta-rs."""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable as RsDeltaTable
from pyspark.sql import DataFrame, SparkSession

from eventlake.checkpoints import CheckpointLog
from eventlake.config import Settings
from eventlake.connectors import (
    BatchContext,
    DeltaInput,
    DeltaOutput,
    FanOut,
    KafkaInput,
    MergeDelta,
    ToDelta,
)
from eventlake.connectors.delta import BATCH_MARK
from eventlake.connectors.delta.log_checkpoints import LogCheckpoints
from eventlake.connectors.delta.tables import ensure_delta_table
from eventlake.connectors.kafka import kafka_records
from eventlake.context import FlowContext
from eventlake.errors import EventlakeError
from eventlake.kafka import produce
from eventlake.pipelines import Pipeline
from eventlake.storage import Location
from eventlake.testing import read_delta, run_available_now, settings_for, unique_name

pytestmark = pytest.mark.integration


def _pipeline() -> Pipeline:
    return Pipeline(unique_name("delta").replace("-", "_"))


def _as_is(ctx: FlowContext, df: DataFrame) -> DataFrame:
    return df


def _append(spark: SparkSession, path: Path, ids: list[str], amount: int = 1) -> None:
    """One Delta commit appending ``ids`` (written by Spark's batch API, outside the flow)."""
    rows = [(i, amount) for i in ids]
    spark.createDataFrame(rows, "id STRING, amount INT").write.format("delta").mode("append").save(
        str(path)
    )


def _ids(path: Path) -> list[str]:
    return sorted(r["id"] for r in read_delta(path).to_pylist())


@pytest.mark.parametrize("start", ["starting_version", "starting_timestamp"])
def test_delta_input_starts_at_a_version_or_timestamp(
    spark: SparkSession, tmp_path: Path, start: str
) -> None:
    source = tmp_path / "lake" / "bronze" / "source"
    for commit in range(4):  # versions 0..3
        _append(spark, source, [f"v{commit}-{i}" for i in range(3)])
    if start == "starting_version":
        inp = DeltaInput("bronze", "source", starting_version=2)
    else:  # the commit time of version 2, in ms: Delta reads the versions from there on
        inp = DeltaInput("bronze", "source", starting_timestamp=_iso_ms(_commit_ms(source, 2)))
    pipeline = _pipeline()
    pipeline.flow(name="copy", input=inp, output=DeltaOutput("silver", "copy"))(_as_is)

    run_available_now(pipeline, settings_for(tmp_path))

    assert _ids(tmp_path / "lake" / "silver" / "copy") == sorted(
        f"v{c}-{i}" for c in (2, 3) for i in range(3)
    )


def _commit_ms(table: Path, version: int) -> int:
    """When Delta holds ``version`` committed: its in-commit timestamp if the table keeps
    them, else its log file's modification time. Not commitInfo's ``timestamp``: that is
    taken before the file is written and can be a few ms after the file system's coarse
    clock stamps it, so starting there would skip the version."""
    log = table / "_delta_log" / f"{version:020d}.json"
    for line in log.read_text().splitlines():
        info = json.loads(line).get("commitInfo") or {}
        if "inCommitTimestamp" in info:
            return int(info["inCommitTimestamp"])
    return log.stat().st_mtime_ns // 1_000_000


def _iso_ms(epoch_ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def test_skip_change_commits_reads_appends_past_updates_and_deletes(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "lake" / "bronze" / "source"
    _append(spark, source, ["a", "b", "c"])
    pipeline = _pipeline()
    pipeline.flow(name="strict", input=DeltaInput("bronze", "source"),
                  output=DeltaOutput("silver", "strict"))(_as_is)  # fmt: skip
    pipeline.flow(name="skipping", input=DeltaInput("bronze", "source", skip_change_commits=True),
                  output=DeltaOutput("silver", "skipping"))(_as_is)  # fmt: skip
    settings = settings_for(tmp_path)
    run_available_now(pipeline, settings)
    quoted = str(source).replace("`", "``")
    spark.sql(f"DELETE FROM delta.`{quoted}` WHERE id = 'a'")
    spark.sql(f"UPDATE delta.`{quoted}` SET amount = 5 WHERE id = 'b'")
    _append(spark, source, ["d"])

    # A flow that reads only appends stops at the change, with a coded error.
    with pytest.raises(EventlakeError) as caught:
        run_available_now(pipeline, settings, flows=["strict"])
    assert caught.value.code == "EL-QUERY-001"
    assert "skip_change_commits=True" in (caught.value.fix or "")
    # skip_change_commits passes over the DELETE and UPDATE and reads the append after.
    run_available_now(pipeline, settings, flows=["skipping"])

    assert _ids(tmp_path / "lake" / "silver" / "skipping") == ["a", "b", "c", "d"]


ACCOUNTS = "id STRING, balance INT"


def _merge_accounts(target: object, source: DataFrame, batch: BatchContext) -> object:
    """Upsert by id; a record with ``deleted`` removes the account."""
    return (
        target.alias("t")  # type: ignore[attr-defined]
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.deleted")
        .whenMatchedUpdate(set={"balance": "s.balance"})
        .whenNotMatchedInsert(condition="NOT s.deleted", values={"id": "s.id",
                                                                 "balance": "s.balance"})
    )  # fmt: skip


def _accounts(ctx: FlowContext, df: DataFrame, batch: BatchContext) -> DataFrame:
    return df.select("id", "balance", "deleted")


def test_change_feed_input_follows_merges(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic()
    pipeline = _pipeline()

    @pipeline.flow(
        input=KafkaInput(),
        output=FanOut(
            MergeDelta("silver", "accounts", _merge_accounts, ACCOUNTS, prepare=_accounts)
        ),
    )
    def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        event = F.from_json(F.col("value").cast("string"), "id STRING, balance INT, deleted "
                            "BOOLEAN")  # fmt: skip
        return df.select(event.alias("e")).select("e.id", "e.balance", "e.deleted")

    @pipeline.flow(
        input=DeltaInput("silver", "accounts", change_feed=True),
        output=DeltaOutput("gold", "account_changes"),
    )
    def changes(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return df.select("id", "balance", "_change_type", "_commit_version")

    def send(*events: tuple[str, int, bool]) -> None:
        produce(bootstrap, topic, [(i, json.dumps({"id": i, "balance": b, "deleted": d}))
                                   for i, b, d in events])  # fmt: skip

    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": topic}})
    send(("a", 10, False), ("b", 20, False), ("c", 30, False))
    run_available_now(pipeline, settings)
    send(("b", 25, False), ("c", 0, True), ("d", 40, False))
    run_available_now(pipeline, settings)

    gold = read_delta(tmp_path / "lake" / "gold" / "account_changes").to_pylist()
    versions = sorted({r["_commit_version"] for r in gold})
    # The first run starts with the table as it was (a snapshot, as inserts); the second
    # run's MERGE is one later commit with every kind of change.
    assert len(versions) == 2
    first, second = versions
    got = sorted((r["_commit_version"], r["id"], r["balance"], r["_change_type"]) for r in gold)
    assert got == sorted([
        (first, "a", 10, "insert"), (first, "b", 20, "insert"), (first, "c", 30, "insert"),
        (second, "b", 20, "update_preimage"), (second, "b", 25, "update_postimage"),
        (second, "c", 30, "delete"), (second, "d", 40, "insert"),
    ])  # fmt: skip
    silver_props = RsDeltaTable(str(tmp_path / "lake" / "silver" / "accounts")).metadata()
    assert silver_props.configuration.get("delta.enableChangeDataFeed") == "true"


def test_partitioned_delta_output(spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "lake" / "bronze" / "source"
    _append(spark, source, [f"x{i}" for i in range(6)])
    pipeline = _pipeline()

    def bucketed(ctx: FlowContext, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        return df.withColumn("bucket", F.substring("id", 2, 1).cast("int") % 2)

    source_table, by = DeltaInput("bronze", "source"), ("bucket",)
    streamed = DeltaOutput("silver", "by_bucket", partition_by=by)
    pipeline.flow(name="streamed", input=source_table, output=streamed)(bucketed)
    fanned = FanOut(ToDelta("silver", "by_bucket_fanout", partition_by=by))
    pipeline.flow(name="fanned", input=source_table, output=fanned)(bucketed)

    run_available_now(pipeline, settings_for(tmp_path))

    for name in ("by_bucket", "by_bucket_fanout"):
        out = tmp_path / "lake" / "silver" / name
        table = RsDeltaTable(str(out))
        assert table.metadata().partition_columns == ["bucket"]
        assert sorted(p.name for p in out.glob("bucket=*")) == ["bucket=0", "bucket=1"]
        rows = table.to_pyarrow_table().to_pylist()
        assert sorted((r["id"], r["bucket"]) for r in rows) == [(f"x{i}", i % 2) for i in range(6)]


def test_merge_schema_takes_a_column_added_mid_stream(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic()
    produce(bootstrap, topic, [(f"o{i}", json.dumps({"id": f"o{i}", "amount": i}))
                               for i in range(3)])  # fmt: skip

    def declare(with_currency: bool, merge_schema: bool) -> Pipeline:
        """The same flow, before and after the producer added ``currency``."""
        pipeline = Pipeline("orders_evolving")

        def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
            from pyspark.sql import functions as F

            value = F.col("value").cast("string")
            cols = [F.get_json_object(value, "$.id").alias("id"),
                    F.get_json_object(value, "$.amount").cast("int").alias("amount")]  # fmt: skip
            if with_currency:
                cols.append(F.get_json_object(value, "$.currency").alias("currency"))
            return df.select(*cols)

        orders = DeltaOutput("silver", "orders", merge_schema=merge_schema)
        pipeline.flow(name="silver", input=KafkaInput(), output=orders)(silver)
        fanned = FanOut(ToDelta("silver", "orders_fanout", merge_schema=merge_schema))
        pipeline.flow(name="fanned", input=KafkaInput(), output=fanned)(silver)
        return pipeline

    settings = settings_for(tmp_path, bootstrap, orders_evolving={"topic": topic})
    run_available_now(declare(with_currency=False, merge_schema=False), settings)
    with_currency = [{"id": f"o{i}", "amount": i, "currency": "EUR"} for i in (3, 4)]
    produce(bootstrap, topic, [(e["id"], json.dumps(e)) for e in with_currency])

    # The new column without merge_schema: the batch fails with a coded error, nothing lands.
    with pytest.raises(EventlakeError) as caught:
        run_available_now(declare(with_currency=True, merge_schema=False), settings)
    # Both flows fail; the runner reports the one it looks at first.
    assert caught.value.code in {"EL-QUERY-001", "EL-SINK-001"}
    assert "merge_schema=True" in (caught.value.fix or "")
    # On the same checkpoint with merge_schema: the column joins the table.
    run_available_now(declare(with_currency=True, merge_schema=True), settings)

    for name in ("orders", "orders_fanout"):
        rows = read_delta(tmp_path / "lake" / "silver" / name).to_pylist()
        assert sorted((r["id"], r["amount"], r["currency"]) for r in rows) == [
            ("o0", 0, None), ("o1", 1, None), ("o2", 2, None), ("o3", 3, "EUR"), ("o4", 4, "EUR")
        ]  # fmt: skip


def test_complete_mode_rewrites_the_aggregate_each_batch(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic()
    pipeline = _pipeline()

    @pipeline.flow(
        input=KafkaInput(), output=DeltaOutput("gold", "per_key"), output_mode="complete"
    )
    def per_key(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return df.selectExpr("CAST(key AS STRING) AS key").groupBy("key").count()

    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": topic}})
    produce(bootstrap, topic, [("a", "1"), ("b", "1"), ("a", "1")])
    run_available_now(pipeline, settings)
    out = tmp_path / "lake" / "gold" / "per_key"
    first = sorted((r["key"], r["count"]) for r in read_delta(out).to_pylist())
    produce(bootstrap, topic, [("a", "1"), ("c", "1")])
    run_available_now(pipeline, settings)

    assert first == [("a", 2), ("b", 1)]
    # Totals over both runs, each key once: the table was rewritten, not appended to.
    assert sorted((r["key"], r["count"]) for r in read_delta(out).to_pylist()) == [
        ("a", 3), ("b", 1), ("c", 1)
    ]  # fmt: skip
    history = RsDeltaTable(str(out)).history()
    marked = [h for h in history if BATCH_MARK in (h.get("userMetadata") or "")]
    assert [h["operationParameters"]["mode"] for h in marked] == ["Overwrite", "Overwrite"]


def _bronze_pipeline() -> Pipeline:
    pipeline = _pipeline()

    @pipeline.flow(input=KafkaInput(), output=DeltaOutput("bronze", "events"))
    def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
        return kafka_records(df)

    return pipeline


def _undo_last_spark_commit(checkpoint: Location) -> int:
    """Delete the checkpoint's last commit entry: Spark then replays that batch, as after
    a crash between the table's commit and the checkpoint's."""
    log = CheckpointLog(checkpoint)
    last = log.last_committed
    assert last is not None
    (checkpoint.path / "commits" / str(last)).unlink()
    assert log.in_flight == last
    return last


def test_a_replayed_batch_finds_its_commit_and_writes_nothing(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    pipeline = _bronze_pipeline()
    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": topic}})
    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(50)])
    run_available_now(pipeline, settings)
    out = tmp_path / "lake" / "bronze" / "events"
    checkpoint = settings.checkpoints.for_flow(pipeline.name, "bronze")
    versions = len(RsDeltaTable(str(out)).history())
    replayed = _undo_last_spark_commit(checkpoint)

    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(50, 80)])
    run_available_now(pipeline, settings)

    keys = [r["key"] for r in read_delta(out).to_pylist()]
    assert sorted(keys) == sorted(f"k{i}" for i in range(80))  # each once
    assert CheckpointLog(checkpoint).last_committed == replayed + 1
    history = RsDeltaTable(str(out)).history()
    assert len(history) == versions + 1  # the replay committed nothing; the new batch did
    marks = [json.loads(h["userMetadata"])[BATCH_MARK] for h in history if h.get("userMetadata")]
    assert sorted(m["batch"] for m in marks) == list(range(replayed + 2))


def test_a_batch_written_by_deltas_own_streaming_sink_is_not_written_again(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Batches of Delta's streaming sink (DeltaOutput's writer before) on the flow's
    checkpoint: the replay of its last batch is found by the sink's SetTransaction."""
    topic = make_topic(partitions=2)
    pipeline = _bronze_pipeline()
    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": topic}})
    out = tmp_path / "lake" / "bronze" / "events"
    checkpoint = settings.checkpoints.for_flow(pipeline.name, "bronze")
    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(20)])
    run_available_now(pipeline, settings)

    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(20, 40)])
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    query = (
        kafka_records(source)
        .writeStream.format("delta")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(out))
    )
    query.awaitTermination(120)
    assert read_delta(out).num_rows == 40
    assert RsDeltaTable(str(out)).history()[0]["operation"] == "STREAMING UPDATE"
    _undo_last_spark_commit(checkpoint)

    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(40, 55)])
    run_available_now(pipeline, settings)

    keys = read_delta(out).column("key").to_pylist()
    assert sorted(keys) == sorted(f"k{i}" for i in range(55))


def _log_checkpoints(table: Path) -> list[int]:
    """The versions of the table's Delta log checkpoints, from the log's file names."""
    names = [p.name for p in (table / "_delta_log").iterdir()]
    return sorted(int(n[:20]) for n in names if ".checkpoint" in n and n.endswith(".parquet"))


def _every(settings: Settings, commits: int) -> Settings:
    lake = settings.lake.model_copy(update={"log_checkpoint_commits": commits})
    return settings.model_copy(update={"lake": lake})


def test_sink_tables_get_log_checkpoints_off_the_batch(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    pipeline = _bronze_pipeline()
    params = {"topic": topic, "max_offsets_per_trigger": 1}
    settings = _every(settings_for(tmp_path, bootstrap, **{pipeline.name: params}), 5)
    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(12)])

    run_available_now(pipeline, settings)

    out = tmp_path / "lake" / "bronze" / "events"
    table = RsDeltaTable(str(out))
    assert table.version() == 12  # the table's creation, then a commit per record
    # Delta's inline checkpoint never comes due; eventlake's came after 5 commits or more.
    assert table.metadata().configuration["delta.checkpointInterval"] == str(2**31 - 1)
    checkpoints = _log_checkpoints(out)
    assert checkpoints
    assert checkpoints[0] >= 5
    assert len(checkpoints) <= 12 // 5
    assert all(b - a >= 5 for a, b in itertools.pairwise(checkpoints))
    last = json.loads((out / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == checkpoints[-1]
    # Both readers start from the checkpoint and see every row once.
    assert sorted(r["key"] for r in read_delta(out).to_pylist()) == sorted(
        f"k{i}" for i in range(12)
    )
    assert spark.read.format("delta").load(str(out)).count() == 12


def test_a_table_with_its_own_interval_keeps_deltas_inline_checkpoints(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=1)
    pipeline = _bronze_pipeline()
    params = {"topic": topic, "max_offsets_per_trigger": 1}
    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: params})
    produce(bootstrap, topic, [("k0", "v0")])
    run_available_now(pipeline, _every(settings, 0))  # creates the table: Delta's interval
    out = tmp_path / "lake" / "bronze" / "events"
    assert RsDeltaTable(str(out)).metadata().configuration["delta.checkpointInterval"] == "100"

    produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(1, 8)])
    run_available_now(pipeline, _every(settings, 3))

    assert RsDeltaTable(str(out)).version() == 8
    assert _log_checkpoints(out) == []  # its 100th commit is Delta's to checkpoint
    assert len(read_delta(out)) == 8


def test_a_commit_leaves_three_files_in_the_log_and_a_cleanup_leaves_none_of_a_removed_version(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Every Delta operation of Spark on a local table lists the whole log folder, so each
    file there costs every batch. A commit leaves three files, not four: Hadoop's hidden
    checksum of the commit is no longer written (a log written before holds it). delta-rs's
    cleanup removes only the commits: the log-checkpoint service removes the rest."""
    out = tmp_path / "events"
    ensure_delta_table(spark, out, "id STRING, amount INT", checkpoint_interval=2**31 - 1,
                       log_retention="1 second")  # fmt: skip
    # Delta refuses a log retention under delta.deletedFileRetentionDuration (7 days).
    configuration = RsDeltaTable(str(out)).metadata().configuration
    assert configuration["delta.logRetentionDuration"] == "interval 1 second"
    assert configuration["delta.deletedFileRetentionDuration"] == "interval 1 second"
    for n in range(12):
        _append(spark, out, [f"a{n}"])
    log = out / "_delta_log"
    files = sorted(p.name for p in log.iterdir() if p.is_file())
    kept = ("{v}.json", "{v}.crc", ".{v}.crc.crc")  # no hidden checksum of the commit
    assert files == sorted(name.format(v=f"{v:020d}") for v in range(13) for name in kept)
    for v in range(13):  # what each commit left before: Hadoop's checksum of the commit
        (log / f".{v:020d}.json.crc").write_text("")
    time.sleep(1.5)  # the commits are older than the retention

    service = LogCheckpoints(5)
    service.after_commit(spark, Location(out))
    assert service.drain(60)
    service.close()

    names = sorted(p.name for p in log.iterdir())
    commits = [int(n[:20]) for n in names if n.endswith(".json") and not n.startswith(".")]
    assert commits == [12]  # the checkpoint's commit; the older ones cleaned up
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 12
    versions = {int(n.lstrip(".")[:20]) for n in names if n.lstrip(".")[:20].isdigit()}
    assert versions == {12}, names
    assert _ids(out) == sorted(f"a{n}" for n in range(12))
    assert spark.read.format("delta").load(str(out)).count() == 12
    _append(spark, out, ["after"])  # Spark goes on committing to the cleaned log
    assert len(_ids(out)) == 13


def test_a_table_with_deletion_vectors_marks_rows_and_is_read_and_counted_without_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A DELETE marks rows in a deletion vector and leaves the file; delta-rs reads the
    table without the marked rows (its pyarrow dataset refuses such tables) and the row
    count from the log leaves them out."""
    from delta.tables import DeltaTable

    from eventlake.connectors.delta import delta_row_count
    from eventlake.connectors.delta.maintenance import vacuum

    out = tmp_path / "history"
    ensure_delta_table(spark, out, "id STRING, amount INT", deletion_vectors=True,
                       checkpoint_interval=2**31 - 1, log_retention="1 second")  # fmt: skip
    rows = spark.createDataFrame([(f"a{n}", 1) for n in range(40)], "id STRING, amount INT")
    rows.coalesce(1).write.format("delta").mode("append").save(str(out))
    files = sorted(p.name for p in out.glob("*.parquet"))
    assert len(files) == 1
    DeltaTable.forPath(spark, str(out)).delete("id IN ('a3', 'a17', 'a29')")

    assert "deletionVectors" in (RsDeltaTable(str(out)).protocol().reader_features or [])
    assert sorted(p.name for p in out.glob("*.parquet")) == files  # no file rewritten
    assert sum(int(dv["cardinality"]) for dv in _newest_vectors(out)) == 3
    kept = sorted(f"a{n}" for n in range(40) if n not in (3, 17, 29))
    assert _ids(out) == kept
    assert delta_row_count(out) == 37
    assert spark.read.format("delta").load(str(out)).count() == 37

    # A second DELETE in the same file replaces its deletion vector: VACUUM removes the
    # replaced one and keeps the one in use.
    first_vectors = {p.name for p in out.glob("deletion_vector_*.bin")}
    DeltaTable.forPath(spark, str(out)).delete("id = 'a5'")
    replaced = {p.name for p in out.glob("deletion_vector_*.bin")} - first_vectors
    assert replaced
    group = unique_name("vacuum")
    spark.sparkContext.setJobGroup(group, "vacuum with deletion vectors")
    try:
        assert "files removed" in vacuum(spark, Location(out), 0)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    # Spark's VACUUM lists the folders in as many tasks as there are cores, not 10,000.
    assert max(_tasks_per_stage(spark, group)) <= spark.sparkContext.defaultParallelism
    assert {p.name for p in out.glob("deletion_vector_*.bin")} == replaced
    kept.remove("a5")
    assert _ids(out) == kept
    assert delta_row_count(out) == 36
    assert spark.read.format("delta").load(str(out)).count() == 36

    # The log checkpoint eventlake writes (delta-rs) keeps the deletion vectors: a copy
    # read from it alone, its commits cleaned up, still leaves the marked rows out.
    time.sleep(1.5)  # the commits are older than the log retention
    service = LogCheckpoints(1)
    service.after_commit(spark, Location(out))
    assert service.drain(60)
    service.close()
    log = out / "_delta_log"
    assert (log / "_last_checkpoint").exists()
    assert len([p for p in log.glob("*.json") if not p.name.startswith(".")]) == 1
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    assert _ids(copy) == kept
    assert delta_row_count(copy) == 36
    assert spark.read.format("delta").load(str(copy)).count() == 36


def _tasks_per_stage(spark: SparkSession, group: str) -> list[int]:
    """The task count of every stage of the jobs run in job group ``group``."""
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
    infos = [tracker.getStageInfo(s) for job in jobs if job is not None for s in job.stageIds]
    counts = [i.numTasks for i in infos if i is not None]
    assert counts, f"no stage ran in job group {group}"
    return counts


def _newest_vectors(path: Path) -> list[dict[str, Any]]:
    """The deletion vectors the table's newest commit adds."""
    newest = max((path / "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in newest.read_text().splitlines()]
    return [a["add"]["deletionVector"] for a in actions if a.get("add", {}).get("deletionVector")]


def test_a_merge_target_with_deletion_vectors_copies_no_row_and_an_older_table_keeps_its_protocol(
    spark: SparkSession,
    bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A new table is created with deletion vectors and its MERGE marks the rows it
    updates and deletes; a table created before without them is merged as it is, with a
    warning that says how to turn them on."""
    topic = make_topic()
    pipeline = _pipeline()
    older = tmp_path / "lake" / "silver" / "accounts_old"
    ensure_delta_table(spark, older, ACCOUNTS)

    def target(name: str) -> MergeDelta:
        return MergeDelta("silver", name, _merge_accounts, ACCOUNTS, prepare=_accounts,
                          deletion_vectors=True)  # fmt: skip

    @pipeline.flow(input=KafkaInput(), output=FanOut(target("accounts"), target("accounts_old")))
    def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        event = F.from_json(F.col("value").cast("string"), "id STRING, balance INT, deleted "
                            "BOOLEAN")  # fmt: skip
        return df.select(event.alias("e")).select("e.id", "e.balance", "e.deleted")

    def send(*events: tuple[str, int, bool]) -> None:
        produce(bootstrap, topic, [(i, json.dumps({"id": i, "balance": b, "deleted": d}))
                                   for i, b, d in events])  # fmt: skip

    settings = settings_for(tmp_path, bootstrap, **{pipeline.name: {"topic": topic}})
    send(*[(f"k{n}", n, False) for n in range(30)])
    caplog.set_level("WARNING", logger="eventlake.connectors.delta.connector")
    run_available_now(pipeline, settings)
    send(("k3", 300, False), ("k7", 0, True), ("new", 1, False))
    run_available_now(pipeline, settings)

    warned = [r.getMessage() for r in caplog.records if "deletion vectors" in r.getMessage()]
    assert len(warned) == 2  # once per run, as its query starts
    assert all("silver/accounts_old was created without" in w for w in warned)
    assert "ALTER TABLE delta.`" in warned[0]
    want = {f"k{n}": n for n in range(30) if n != 7} | {"k3": 300, "new": 1}
    for name, with_vectors in (("accounts", True), ("accounts_old", False)):
        path = tmp_path / "lake" / "silver" / name
        rows = {r["id"]: r["balance"] for r in read_delta(path).to_pylist()}
        assert rows == want, name
        features = RsDeltaTable(str(path)).protocol().reader_features or []
        assert ("deletionVectors" in features) is with_vectors, name
        merge = RsDeltaTable(str(path)).history(1)[0]
        assert merge["operation"] == "MERGE"
        copied = int(merge["operationMetrics"]["numTargetRowsCopied"])
        assert (copied == 0) is with_vectors, (name, copied)
