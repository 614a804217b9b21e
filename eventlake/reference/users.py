"""The users CDC pipeline: Debezium change events -> bronze -> SCD1, SCD2, PostgreSQL, Kafka.

Input: Debezium-shaped JSON change events of a ``users`` table, keyed by ``user_id``
(see ``eventlake.generator.cdc``).

- ``bronze``: every Kafka record as received, with the change parsed: ``op``,
  ``user_id``, ``source_ts_ms``, the row's fields, ``is_tombstone`` and ``reason`` (null
  when valid) (bronze/users_cdc).
- ``silver``: one fan-out flow. For each batch it writes
  - ``silver/users_quarantine``: malformed change events, raw value and reason;
  - ``silver/users_history`` (SCD type 2): every version with ``valid_from``,
    ``valid_to`` (null while current) and ``is_current``; a delete closes the version;
  - ``silver/users`` (SCD type 1): the latest state per ``user_id``; deletes remove it;
  - the PostgreSQL table ``pipelines.users.postgres_table``: the same latest state;
  - the Kafka topic ``pipelines.users.state_topic``: the new state of each changed
    user as JSON (a tombstone for a delete), at-least-once.

Order: a change is placed by ``source.ts_ms`` (the database commit time), ties broken by
Kafka offset (all changes of a user share a partition, as Debezium keys them). Events
arrive out of order and twice, so each batch recomputes the affected users from their
earliest change in it on: their changes in bronze from that instant, and the version the
history had open at it. A late event lands in the right place in the history and never
overwrites a newer state, and a duplicate changes nothing. Tombstones are ignored. Both
reads are bounded by the batch's earliest change, so they skip older files and do not
grow with bronze.

The history's MERGE reads what a batch can change: a change at instant ``m`` can only
alter the versions still open at ``m`` (``valid_to`` null or at least ``m``), so the MERGE
is given those versions alone and bounded, in its condition, to target rows still open at
the batch's earliest change. The table is partitioned by ``is_current``: closed versions
leave the files of current ones, and a batch of new changes rewrites only the current
versions' partition and the newest closed files (the older ones are skipped by their
``valid_to`` statistics). The table has deletion vectors: the MERGE marks the versions it
replaces and writes only what changed. Without them it copied the rest of every file it
touched, and almost every batch touches the closed file the batch before wrote, so that
file grew with the history and was rewritten at every batch (the two-hour soak, L in
``bench/results/soak-log.md``). A history table created before this layout keeps its
own and is still merged correctly, reading and writing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from eventlake.connectors.delta import DeltaInput, DeltaOutput, MergeDelta, ToDelta
from eventlake.connectors.fanout import FanOut
from eventlake.connectors.kafka import KafkaInput, ToKafka, kafka_records
from eventlake.connectors.postgres import ToPostgres
from eventlake.durations import utc_instant
from eventlake.monitoring.observed import count_quarantined
from eventlake.pipelines import Pipeline, PipelineParams
from eventlake.transforms import first_failure, parse_json, quarantine_rows
from eventlake.transforms.parsing import CORRUPT, INVALID_JSON

if TYPE_CHECKING:
    from delta.tables import DeltaMergeBuilder, DeltaTable
    from pyspark.sql import Column, DataFrame

    from eventlake.connectors import BatchContext
    from eventlake.pipelines import FlowContext


class UsersParams(PipelineParams):
    topic: str | None = Field(default="users_cdc", description="Debezium change events.")
    postgres_table: str = Field(default="users", description="Upsert target in PostgreSQL.")
    state_topic: str = Field(default="users_state", description="Compacted latest-state topic.")
    json_decoder: Literal["spark"] = Field(
        default="spark", description="Change events nest objects: from_json decodes them."
    )


users = Pipeline(
    "users",
    params=UsersParams,
    description="Debezium users CDC -> bronze -> SCD1 + SCD2 (Delta), PostgreSQL, Kafka",
)

ROW = "user_id STRING, name STRING, email STRING, country STRING, tier STRING"
CHANGE = f"before STRUCT<{ROW}>, after STRUCT<{ROW}>, op STRING, source STRUCT<ts_ms STRING>"
FIELDS = ("name", "email", "country", "tier")

INVALID_OP = "invalid_op"
MISSING_AFTER = "missing_after"
MISSING_BEFORE = "missing_before"
MISSING_USER_ID = "missing_user_id"
MISSING_SOURCE_TS = "missing_source_ts"
REASONS = (
    INVALID_JSON,
    INVALID_OP,
    MISSING_AFTER,
    MISSING_BEFORE,
    MISSING_USER_ID,
    MISSING_SOURCE_TS,
)

USERS_DDL = (
    "user_id BIGINT, name STRING, email STRING, country STRING, tier STRING, "
    "updated_at TIMESTAMP, source_ts_ms BIGINT, source_offset BIGINT"
)
HISTORY_DDL = (
    "user_id BIGINT, name STRING, email STRING, country STRING, tier STRING, "
    "valid_from TIMESTAMP, valid_to TIMESTAMP, is_current BOOLEAN, "
    "source_ts_ms BIGINT, source_offset BIGINT"
)
QUARANTINE_DDL = (
    "key STRING, value STRING, topic STRING, partition INT, offset BIGINT, "
    "kafka_timestamp TIMESTAMP, reason STRING, quarantined_at TIMESTAMP"
)


def parse_changes(records: DataFrame) -> DataFrame:
    """Kafka records (bronze shape) with the change parsed and checked."""
    from pyspark.sql import functions as F

    parsed = parse_json(records, CHANGE, once=True)
    d = F.col("data")
    op = d["op"]
    image = F.when(op == "d", d["before"]).otherwise(d["after"])
    user_id = F.expr(
        "try_cast(CASE WHEN data.op = 'd' THEN data.before.user_id "
        "ELSE data.after.user_id END AS BIGINT)"
    )
    source_ts = F.expr("try_cast(data.source.ts_ms AS BIGINT)")
    tombstone = F.col("value").isNull()
    reason = first_failure(
        [
            (INVALID_JSON, d.isNull() | d[CORRUPT].isNotNull()),
            (INVALID_OP, ~F.coalesce(op.isin("c", "u", "d", "r"), F.lit(False))),
            (MISSING_AFTER, (op != "d") & d["after"].isNull()),
            (MISSING_BEFORE, (op == "d") & d["before"].isNull()),
            (MISSING_USER_ID, user_id.isNull()),
            (MISSING_SOURCE_TS, source_ts.isNull()),
        ]
    )
    return parsed.select(
        *records.columns,
        tombstone.alias("is_tombstone"),
        F.when(tombstone, F.lit(None)).otherwise(reason).alias("reason"),
        op.alias("op"),
        user_id.alias("user_id"),
        source_ts.alias("source_ts_ms"),
        *(image[f].alias(f) for f in FIELDS),
    )


@users.flow(input=KafkaInput(), output=DeltaOutput("bronze", "users_cdc"))
def bronze(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """Every Kafka record as received, with the change parsed and checked."""
    return parse_changes(kafka_records(df))


def _valid(df: DataFrame) -> Column:
    from pyspark.sql import functions as F

    return ~F.col("is_tombstone") & F.col("reason").isNull()


def changes_of_batch_users(ctx: FlowContext, batch_df: DataFrame, batch: BatchContext) -> DataFrame:
    """The changes that decide the versions of the users this batch touches, one per
    instant, with ``_since``: the user's earliest instant among this batch's changes.

    Those are the user's valid changes in bronze from ``_since`` on, and the version the
    history had open at ``_since`` (as the change that opened it): what came before that
    version cannot change. Both reads are bounded by the batch's earliest ``_since``, so
    Delta skips the files of older changes and closed versions by their statistics, and a
    batch costs the same after a year of changes as after a day. Several changes of one
    user at the same ``source_ts_ms`` collapse to the one with the highest offset.
    Computed once per batch and shared by the batch's targets.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def build() -> DataFrame:
        spark = batch_df.sparkSession
        touched = (
            batch_df.where(_valid(batch_df))
            .groupBy("user_id")
            .agg(F.min("source_ts_ms").alias("_since"))
        )
        first = touched.agg(F.min("_since")).head()
        earliest = first[0] if first is not None else None
        valid_to = F.col("valid_to")
        if earliest is None:  # no valid change in the batch: nothing to read
            bronze_bound = history_bound = F.lit(False)
        else:
            bronze_bound = F.col("source_ts_ms") >= F.lit(earliest)
            history_bound = valid_to.isNull() | (valid_to >= F.lit(utc_instant(int(earliest))))
        since = F.col("_since")
        bronze_path = str(ctx.table_path("bronze", "users_cdc"))
        bronze_table = spark.read.format("delta").load(bronze_path)
        later = (
            bronze_table.where(bronze_bound)
            .where(_valid(bronze_table))
            .join(F.broadcast(touched), "user_id")
            .where(F.col("source_ts_ms") >= since)
        )
        instant = Window.partitionBy("user_id", "source_ts_ms").orderBy(F.col("offset").desc())
        changes = (
            later.withColumn("_rank", F.row_number().over(instant))
            .where("_rank = 1")
            .select(
                "user_id",
                "op",
                "source_ts_ms",
                F.col("offset").alias("source_offset"),
                *FIELDS,
                "_since",
            )
        )
        history_path = str(ctx.table_path("silver", "users_history"))
        versions = spark.read.format("delta").load(history_path)
        opened_before = (
            versions.where(history_bound)
            .join(F.broadcast(touched), "user_id")
            .where(
                (F.col("source_ts_ms") < since)
                & (valid_to.isNull() | (F.unix_millis(valid_to) >= since))
            )
            .select(
                "user_id",
                F.lit("u").alias("op"),
                "source_ts_ms",
                "source_offset",
                *FIELDS,
                "_since",
            )
        )
        return changes.unionByName(opened_before)

    return batch.memo("changes", build)


def latest_state(ctx: FlowContext, batch_df: DataFrame, batch: BatchContext) -> DataFrame:
    """Per touched user: the latest change, with ``_deleted`` when it is a delete.
    Computed once per batch: SCD1, PostgreSQL and Kafka all write it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def build() -> DataFrame:
        events = changes_of_batch_users(ctx, batch_df, batch)
        newest = Window.partitionBy("user_id").orderBy(F.col("source_ts_ms").desc())
        return (
            events.withColumn("_rank", F.row_number().over(newest))
            .where("_rank = 1")
            .select(
                "user_id",
                *FIELDS,
                F.timestamp_millis("source_ts_ms").alias("updated_at"),
                "source_ts_ms",
                "source_offset",
                (F.col("op") == "d").alias("_deleted"),
            )
        )

    return batch.memo("latest", build)


def history(ctx: FlowContext, batch_df: DataFrame, batch: BatchContext) -> DataFrame:
    """Per touched user: the versions this batch's changes can alter, those still open at
    the user's earliest change in it (one per non-delete instant), and instants whose
    winning change is a delete (``_delete``: such a version must not exist)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    events = changes_of_batch_users(ctx, batch_df, batch)
    following = Window.partitionBy("user_id").orderBy("source_ts_ms")
    next_ts = F.lead("source_ts_ms").over(following)
    versions = events.select(
        "user_id",
        *FIELDS,
        F.timestamp_millis("source_ts_ms").alias("valid_from"),
        F.timestamp_millis(next_ts).alias("valid_to"),
        next_ts.isNull().alias("is_current"),
        "source_ts_ms",
        "source_offset",
        (F.col("op") == "d").alias("_delete"),
        "_since",
        next_ts.alias("_next_ts"),
    )
    # A version closed before the user's earliest change in the batch stays as it is.
    open_since = F.col("_next_ts").isNull() | (F.col("_next_ts") >= F.col("_since"))
    return versions.where(open_since).drop("_next_ts")


def merge_history(target: DeltaTable, source: DataFrame, batch: BatchContext) -> DeltaMergeBuilder:
    from pyspark.sql import functions as F

    columns = [c for c in source.columns if c not in ("_delete", "_since")]
    changed = " OR ".join(f"NOT (t.{c} <=> s.{c})" for c in columns)
    first = source.agg(F.min("_since")).head()
    since = first[0] if first is not None else None
    # Target rows closed before the batch's earliest change match no source row: a literal
    # bound lets Delta skip their files by their valid_to statistics instead of reading them.
    still_open = F.col("t.valid_to").isNull()
    if since is not None:
        still_open = still_open | (F.col("t.valid_to") >= F.lit(utc_instant(int(since))))
    key = (F.col("t.user_id") == F.col("s.user_id")) & (
        F.col("t.valid_from") == F.col("s.valid_from")
    )
    return (
        target.alias("t")
        .merge(source.alias("s"), key & still_open)
        .whenMatchedDelete(condition="s._delete")
        .whenMatchedUpdate(
            condition=f"NOT s._delete AND ({changed})", set={c: f"s.{c}" for c in columns}
        )
        .whenNotMatchedInsert(condition="NOT s._delete", values={c: f"s.{c}" for c in columns})
    )


NEWER = (
    "(s.source_ts_ms > t.source_ts_ms OR "
    "(s.source_ts_ms = t.source_ts_ms AND s.source_offset > t.source_offset))"
)


def merge_latest(target: DeltaTable, source: DataFrame, batch: BatchContext) -> DeltaMergeBuilder:
    columns = [c for c in source.columns if c != "_deleted"]
    return (
        target.alias("t")
        .merge(source.alias("s"), "t.user_id = s.user_id")
        .whenMatchedDelete(condition=f"s._deleted AND {NEWER}")
        .whenMatchedUpdate(
            condition=f"NOT s._deleted AND {NEWER}", set={c: f"s.{c}" for c in columns}
        )
        .whenNotMatchedInsert(condition="NOT s._deleted", values={c: f"s.{c}" for c in columns})
    )


def quarantined(ctx: FlowContext, batch_df: DataFrame, batch: BatchContext) -> DataFrame:
    return quarantine_rows(batch_df)


def state_records(ctx: FlowContext, batch_df: DataFrame, batch: BatchContext) -> DataFrame:
    """The new state of each touched user as a Kafka record; a tombstone for a delete."""
    from pyspark.sql import functions as F

    state = latest_state(ctx, batch_df, batch)
    value = F.to_json(F.struct("user_id", *FIELDS, "updated_at"))
    return state.select(
        F.col("user_id").cast("string").alias("key"),
        F.when(F.col("_deleted"), F.lit(None).cast("string")).otherwise(value).alias("value"),
    )


@users.flow(
    input=DeltaInput("bronze", "users_cdc"),
    output=FanOut(
        ToDelta("silver", "users_quarantine", prepare=quarantined, schema=QUARANTINE_DDL),
        MergeDelta(
            "silver",
            "users_history",
            merge_history,
            HISTORY_DDL,
            prepare=history,
            partition_by=("is_current",),
            deletion_vectors=True,
        ),
        MergeDelta(
            "silver",
            "users",
            merge_latest,
            USERS_DDL,
            prepare=latest_state,
            cluster_by=("user_id",),
        ),
        ToPostgres(
            "postgres_table",
            key=("user_id",),
            order_by=("source_ts_ms", "source_offset"),
            delete_flag="_deleted",
            prepare=latest_state,
        ),
        ToKafka("state_topic", prepare=state_records),
    ),
    description="fan-out: Delta exactly-once, PostgreSQL exactly-once, Kafka at-least-once",
)
def silver(ctx: FlowContext, df: DataFrame) -> DataFrame:
    """The bronze changes; the fan-out's targets turn each batch into their rows."""
    return count_quarantined(df, "reason")
