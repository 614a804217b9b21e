"""The users CDC pipeline against an independent computation; replays change nothing."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from delta.tables import DeltaTable
from deltalake import DeltaTable as RsDeltaTable
from pyspark.sql import SparkSession

from eventlake.checkpoints import CheckpointLog, stream_id
from eventlake.config import PostgresSettings, Settings
from eventlake.connectors import BatchContext, FanOut, Guarantee
from eventlake.connectors.delta import BATCH_MARK
from eventlake.generator import CdcConfig, CdcGenerator, GeneratedRecord, send
from eventlake.pipelines.loader import load_pipelines
from eventlake.pipelines.plan import build_plan
from eventlake.testing import (
    delta_version,
    read_delta,
    run_available_now,
    settings_for,
    unique_name,
)
from tests.integration.users_expected import (
    FIELDS,
    expected_history,
    expected_quarantine,
    expected_users,
)

pytestmark = pytest.mark.integration


def users_settings(
    bootstrap: str, root: Path, topic: str, pg: PostgresSettings, **params: Any
) -> Settings:
    settings = settings_for(root, bootstrap, users={"topic": topic, **params}, examples=True)
    return settings.model_copy(update={"postgres": pg})


def run_users(settings: Settings, spark: SparkSession) -> None:
    run_available_now("users", settings)


def fresh_users(
    bootstrap: str,
    make_topic: Callable[..., str],
    postgres: PostgresSettings,
    root: Path,
    name: str,
) -> tuple[str, str, Settings]:
    """A CDC topic, a state topic and a PostgreSQL table of the test's own: (CDC topic,
    table, settings)."""
    topic, state = make_topic(prefix=f"cdc-{name}"), make_topic(prefix=f"state-{name}")
    table = unique_name(f"users_{name}").replace("-", "_")
    settings = users_settings(bootstrap, root, topic, postgres, postgres_table=table,
                              state_topic=state)  # fmt: skip
    return topic, table, settings


def naive(value: Any) -> Any:
    """Timestamps as naive UTC: delta-rs reads them zoned, PostgreSQL's TIMESTAMP is not."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def scd1(root: Path) -> dict[int, tuple[Any, ...]]:
    rows = read_delta(root / "lake" / "silver" / "users").to_pylist()
    assert len({r["user_id"] for r in rows}) == len(rows)
    return {r["user_id"]: (*(r[f] for f in FIELDS), naive(r["updated_at"])) for r in rows}


def scd2(root: Path) -> Counter[tuple[Any, ...]]:
    rows = read_delta(root / "lake" / "silver" / "users_history").to_pylist()
    return Counter(
        (
            r["user_id"],
            *(r[f] for f in FIELDS),
            naive(r["valid_from"]),
            naive(r["valid_to"]),
            r["is_current"],
        )
        for r in rows
    )


def pg_users(pg: PostgresSettings, table: str) -> dict[int, tuple[Any, ...]]:
    with psycopg.connect(**pg.connect_kwargs()) as conn:
        rows = conn.execute(
            f'SELECT user_id, name, email, country, tier, updated_at FROM "{table}"'
        ).fetchall()
    return {r[0]: tuple(naive(v) for v in r[1:]) for r in rows}


def assert_matches(
    root: Path, records: list[GeneratedRecord], pg: PostgresSettings, table: str
) -> None:
    want = expected_users(records)
    assert want, "the generated stream left no user"
    assert scd1(root) == want
    assert scd2(root) == expected_history(records)
    assert pg_users(pg, table) == want
    quarantine = read_delta(root / "lake" / "silver" / "users_quarantine").to_pylist()
    assert Counter(r["reason"] for r in quarantine) == expected_quarantine(records)


def test_users_cdc_matches_an_independent_computation(
    spark: SparkSession,
    bootstrap: str,
    make_topic: Callable[..., str],
    postgres: PostgresSettings,
    tmp_path: Path,
) -> None:
    topic, state = make_topic(partitions=3, prefix="cdc"), make_topic(prefix="users-state")
    table = unique_name("users").replace("-", "_")
    settings = users_settings(bootstrap, tmp_path, topic, postgres, postgres_table=table,
                              state_topic=state, max_offsets_per_trigger=150)  # fmt: skip
    gen = CdcGenerator(CdcConfig(seed=11, users=30, out_of_order_fraction=0.15,
                                 duplicate_fraction=0.08, malformed_fraction=0.03))  # fmt: skip
    records = gen.records(1200)
    first = [next(records) for _ in range(700)]
    kinds = Counter(r.kind for r in first)
    assert {"valid", "tombstone", "duplicate", "out_of_order", "malformed"} <= set(kinds)
    send(bootstrap, topic, first)
    run_users(settings, spark)
    assert_matches(tmp_path, first, postgres, table)

    # More changes on the same checkpoints: late events now land among stored versions.
    rest = list(records)
    send(bootstrap, topic, rest)
    run_users(settings, spark)
    assert_matches(tmp_path, first + rest, postgres, table)

    # Deletes happened and some users came back after one.
    history = scd2(tmp_path)
    closed_then_reopened = {row[0] for row in history if not row[-1]} & {
        row[0] for row in history if row[-1]
    }
    assert closed_then_reopened


def test_replaying_a_batch_changes_no_sink(
    spark: SparkSession,
    bootstrap: str,
    make_topic: Callable[..., str],
    postgres: PostgresSettings,
    tmp_path: Path,
) -> None:
    topic, table, settings = fresh_users(bootstrap, make_topic, postgres, tmp_path, "replay")
    send(bootstrap, topic, CdcGenerator(CdcConfig(seed=5, users=10)).records(300))
    run_users(settings, spark)

    plan = build_plan(
        load_pipelines(examples=True).get("users"), settings, spark, trigger="available-now"
    )
    silver = next(f for f in plan.flows if f.spec.name == "silver")
    fanout = silver.spec.output
    assert isinstance(fanout, FanOut)
    bronze = spark.read.format("delta").load(str(tmp_path / "lake" / "bronze" / "users_cdc"))
    # The last batch the stream committed, handed to every writer again with its id.
    last = CheckpointLog(silver.checkpoint).last_committed
    assert last is not None
    stream = stream_id(silver.checkpoint)
    batch = BatchContext(silver.ctx, last, stream, spark)
    # One user's versions deleted from the history outside the flow: a MERGE of the batch
    # puts them back (one that changes nothing commits nothing), so only the batch's mark
    # keeps the replay from writing.
    history_path = tmp_path / "lake" / "silver" / "users_history"
    versions = scd2(tmp_path)
    gone = min(row[0] for row in versions)
    DeltaTable.forPath(spark, str(history_path)).delete(f"user_id = {gone}")
    assert all(row[0] != gone for row in scd2(tmp_path))
    tables = ["users", "users_history", "users_quarantine"]
    before = {t: delta_version(tmp_path / "lake" / "silver" / t) for t in tables}
    pg_before = pg_users(postgres, table)
    for target in fanout.targets:
        if target.guarantee is not Guarantee.EXACTLY_ONCE:
            continue  # Kafka: at-least-once by design
        target.write(bronze, batch)
    after = {t: delta_version(tmp_path / "lake" / "silver" / t) for t in tables}
    assert after == before
    assert pg_users(postgres, table) == pg_before

    # The same data under a batch id never written does commit: the skip was the txn id.
    fresh = BatchContext(silver.ctx, last + 1, stream, spark)
    for target in fanout.targets:
        if target.target_id(silver.ctx) == "merge:silver/users_history":
            target.write(bronze, fresh)
    assert delta_version(history_path) == before["users_history"] + 1
    assert scd2(tmp_path) == versions
    # That MERGE's commit carries the batch's mark and no Delta SetTransaction.
    newest = RsDeltaTable(str(history_path)).history(1)[0]
    assert newest["operation"] == "MERGE"
    mark = json.loads(newest["userMetadata"])[BATCH_MARK]
    assert mark == {"app": fresh.app_id("merge:silver/users_history"), "batch": last + 1}
    commit = history_path / "_delta_log" / f"{delta_version(history_path):020d}.json"
    assert not [a for a in map(json.loads, commit.read_text().splitlines()) if "txn" in a]


def _history_merges(path: Path, after: int) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(commitInfo, remove actions) of each MERGE into the history after version ``after``."""
    merges = []
    for version in range(after + 1, delta_version(path) + 1):
        commit = path / "_delta_log" / f"{version:020d}.json"
        actions = [json.loads(line) for line in commit.read_text().splitlines()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        if info["operation"] == "MERGE":
            merges.append((info, [a["remove"] for a in actions if "remove" in a]))
    return merges


def test_a_batch_of_new_changes_rewrites_no_closed_version(
    spark: SparkSession,
    bootstrap: str,
    make_topic: Callable[..., str],
    postgres: PostgresSettings,
    tmp_path: Path,
) -> None:
    topic, table, settings = fresh_users(bootstrap, make_topic, postgres, tmp_path, "bounded")
    gen = CdcGenerator(CdcConfig(seed=3, users=20, out_of_order_fraction=0.0,
                                 duplicate_fraction=0.0, malformed_fraction=0.0))  # fmt: skip
    records = list(gen.records(600))

    def later_changes(i: int) -> int:
        return sum(1 for r in records[i + 1 : 300] if r.data and r.key == records[i].key)

    # One update held back until the last run: it lands between two closed versions.
    late = next(
        i
        for i in range(50, 200)
        if records[i].data and records[i].data["op"] == "u" and later_changes(i) >= 2
    )
    again = next(r for r in records[:50] if r.data)
    first = [r for i, r in enumerate(records[:300]) if i != late]
    send(bootstrap, topic, first)
    run_users(settings, spark)
    assert_matches(tmp_path, first, postgres, table)
    history_path = tmp_path / "lake" / "silver" / "users_history"
    assert RsDeltaTable(str(history_path)).metadata().partition_columns == ["is_current"]
    before = delta_version(history_path)

    # Changes later than every stored version, in two runs. Meanwhile the files of the
    # versions closed before each run, and bronze's files of the changes before it, are
    # moved away: a batch that read one (its MERGE, or the changes it recomputes) fails.
    second = records[300:600]
    closed, aside = history_path / "is_current=false", tmp_path / "aside"
    bronze_path = tmp_path / "lake" / "bronze" / "users_cdc"
    aside.mkdir()
    for part in (second[:150], second[150:]):
        old_files = [f.rename(aside / f.name) for f in closed.iterdir()]
        old_changes = [f.rename(aside / f.name) for f in bronze_path.glob("*.parquet")]
        assert old_files
        assert old_changes
        send(bootstrap, topic, part)
        run_users(settings, spark)
        for f in old_files:
            f.rename(closed / f.name)
        for f in old_changes:
            f.rename(bronze_path / f.name)
    assert_matches(tmp_path, first + second, postgres, table)
    merges = _history_merges(history_path, before)
    assert len(merges) >= 2
    for info, removes in merges:
        # Current versions were closed: their files rewritten, no closed version's file.
        assert int(info["operationMetrics"]["numTargetRowsUpdated"]) > 0
        assert removes
        assert all(r["partitionValues"] == {"is_current": "true"} for r in removes)
    before = delta_version(history_path)

    # The held-back change and a second copy of an old one: closed versions change.
    third = [records[late], again]
    send(bootstrap, topic, third)
    run_users(settings, spark)
    assert_matches(tmp_path, first + second + third, postgres, table)
    late_merges = _history_merges(history_path, before)
    removed = [r for _, removes in late_merges for r in removes]
    assert {"is_current": "false"} in [r["partitionValues"] for r in removed]
    # The closed versions it changed are marked in deletion vectors: the rest of their
    # files is not copied.
    assert "deletionVectors" in (RsDeltaTable(str(history_path)).protocol().reader_features or [])
    for info, _ in late_merges:
        metrics = info["operationMetrics"]
        assert int(metrics["numTargetRowsCopied"]) == 0
        assert int(metrics["numTargetDeletionVectorsAdded"]) > 0
