"""Planning creates each flow's output on a worker while the next flows are built; a flow
is built only once the outputs of the levels before it exist, and a failed creation is
raised once every other creation has finished. A run creates an output no flow reads
while its flow's query starts; the first batch waits for it."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from eventlake.checkpoints import CheckpointLog
from eventlake.connectors import DeltaInput, DeltaOutput, FilesInput
from eventlake.context import FlowContext
from eventlake.errors import EventlakeError
from eventlake.operations.native_trim import TRIM_THREAD
from eventlake.pipelines import Pipeline
from eventlake.pipelines.plan import build_plan
from eventlake.run import run_pipeline, run_plan
from eventlake.scope import CREATE_THREADS, OutputCreation, RunScope
from eventlake.testing import read_delta, running_pipeline, settings_for

pytestmark = pytest.mark.integration

SCHEMA = "id STRING, amount DOUBLE"
#: How long a creation waits to see the next flow built (only reached when planning is
#: sequential, which the test then reports).
HANDSHAKE_SECONDS = 60.0


@dataclass(frozen=True)
class AwaitedOutput(DeltaOutput):
    """A Delta output whose creation first waits for ``built`` (the next flow's transform
    sets it) and records whether it came."""

    built: threading.Event = field(default_factory=threading.Event, compare=False)
    seen: list[bool] = field(default_factory=list, compare=False)

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        self.seen.append(self.built.wait(HANDSHAKE_SECONDS))
        super().ensure(ctx, schema)


@dataclass(frozen=True)
class HeldOutput(DeltaOutput):
    """A Delta output whose creation waits until the test sets ``release``."""

    release: threading.Event = field(default_factory=threading.Event, compare=False)

    def ensure(self, ctx: FlowContext, schema: StructType) -> None:
        assert self.release.wait(HANDSHAKE_SECONDS), "the test never released the creation"
        super().ensure(ctx, schema)


def _inbox(tmp_path: Path) -> FilesInput:
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "a.json").write_text(json.dumps({"id": "r-1", "amount": 1.0}) + "\n")
    return FilesInput("inbox", "json", SCHEMA)


def test_an_output_is_created_while_the_next_flow_is_built(
    spark: SparkSession, tmp_path: Path
) -> None:
    inbox = _inbox(tmp_path)
    first = AwaitedOutput("silver", "first")
    built_at: dict[str, bool] = {}
    p = Pipeline("overlap")

    @p.flow(name="a_first", input=inbox, output=first)
    def a_first(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    @p.flow(name="b_second", input=inbox, output=DeltaOutput("silver", "second"))
    def b_second(ctx: Any, df: DataFrame) -> DataFrame:
        first.built.set()
        return df

    @p.flow(name="c_downstream", input=DeltaInput("silver", "first"),
            output=DeltaOutput("gold", "third"))  # fmt: skip
    def c_downstream(ctx: Any, df: DataFrame) -> DataFrame:
        lake = tmp_path / "lake"
        built_at["first"] = (lake / "silver" / "first" / "_delta_log").is_dir()
        built_at["second"] = (lake / "silver" / "second" / "_delta_log").is_dir()
        return df

    plan = build_plan(p, settings_for(tmp_path), spark)

    assert first.seen == [True], "a_first's output was created only after b_second was built"
    assert [f.spec.name for f in plan.flows] == ["a_first", "b_second", "c_downstream"]
    # The level below c_downstream's was complete before it was built.
    assert built_at == {"first": True, "second": True}
    for layer, name in (("silver", "first"), ("silver", "second"), ("gold", "third")):
        table = read_delta(tmp_path / "lake" / layer / name)
        assert table.num_rows == 0
        assert table.schema.names == ["id", "amount"]
    assert not [t for t in threading.enumerate() if t.name.startswith("eventlake-create")]


def test_a_failed_creation_is_raised_after_the_others_finished(
    spark: SparkSession, tmp_path: Path
) -> None:
    inbox = _inbox(tmp_path)
    blocked = tmp_path / "lake" / "silver" / "blocked"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the table's folder would go\n")
    p = Pipeline("failing")

    @p.flow(name="a_blocked", input=inbox, output=DeltaOutput("silver", "blocked"))
    def a_blocked(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    @p.flow(name="b_fine", input=inbox, output=DeltaOutput("silver", "fine"))
    def b_fine(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    with pytest.raises(EventlakeError) as raised:
        build_plan(p, settings_for(tmp_path), spark)

    assert "failing.a_blocked" in raised.value.what
    assert "creating delta:silver/blocked" in raised.value.what
    assert raised.value.code.startswith("EL-")
    assert blocked.is_file()  # nothing replaced the file
    assert read_delta(tmp_path / "lake" / "silver" / "fine").num_rows == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("eventlake-create")]


def _two_levels(tmp_path: Path, name: str, gold: DeltaOutput) -> Pipeline:
    inbox = _inbox(tmp_path)
    p = Pipeline(name)

    @p.flow(name="a_silver", input=inbox, output=DeltaOutput("silver", "first"))
    def a_silver(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    @p.flow(name="b_gold", input=DeltaInput("silver", "first"), output=gold)
    def b_gold(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    return p


def test_an_output_no_flow_reads_is_created_while_its_query_runs(
    spark: SparkSession, tmp_path: Path
) -> None:
    gold = HeldOutput("gold", "leaf")
    p = _two_levels(tmp_path, "deferred", gold)
    lake = tmp_path / "lake"
    run = RunScope()
    plan = build_plan(p, settings_for(tmp_path), spark, trigger="available-now", run=run,
                      defer_creation=True)  # fmt: skip

    # The plan is back while gold's creation is held; silver, which b_gold reads, exists.
    creation = run.find(OutputCreation)
    assert creation is not None
    assert creation.pending() == ["deferred.b_gold"]
    assert (lake / "silver" / "first" / "_delta_log").is_dir()
    assert not (lake / "gold" / "leaf" / "_delta_log").exists()
    results: list[object] = []
    runner = threading.Thread(target=lambda: results.append(run_plan(plan)))
    runner.start()
    gold_log = CheckpointLog(plan.flows[1].checkpoint)
    deadline = time.monotonic() + 120
    while gold_log.in_flight is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gold_log.in_flight == 0, "b_gold's query never planned its first batch"
    assert runner.is_alive()
    assert not (lake / "gold" / "leaf" / "_delta_log").exists()
    assert gold_log.last_committed is None
    gold.release.set()
    runner.join(120)
    assert not runner.is_alive()
    assert len(results) == 1
    table = DeltaTable(str(lake / "gold" / "leaf"))
    # Created first, then written: a write that had not waited would have made version 0.
    assert [h["operation"] for h in table.history()] == ["WRITE", "CREATE TABLE"]
    assert table.to_pyarrow_table().to_pylist() == [{"id": "r-1", "amount": 1.0}]
    assert gold_log.last_committed == 0
    assert creation.pending() == []
    assert not [t for t in threading.enumerate() if t.name.startswith(CREATE_THREADS)]


def test_a_deferred_creation_that_fails_fails_its_flows_first_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    p = _two_levels(tmp_path, "deferred_fails", DeltaOutput("gold", "blocked"))
    blocked = tmp_path / "lake" / "gold" / "blocked"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the table's folder would go\n")

    with pytest.raises(EventlakeError) as raised:
        run_pipeline(p, settings_for(tmp_path), trigger="available-now")

    assert "deferred_fails.b_gold" in raised.value.what
    assert "creating delta:gold/blocked" in raised.value.what
    assert raised.value.code.startswith("EL-")
    assert blocked.is_file()
    # It failed in b_gold's first batch (planned, never committed), after a_silver ran.
    (checkpoint,) = (tmp_path / "checkpoints").glob("**/b_gold")
    assert CheckpointLog(checkpoint).in_flight == 0
    assert read_delta(tmp_path / "lake" / "silver" / "first").num_rows == 1


def test_a_run_that_ends_leaves_every_output_even_of_a_flow_that_wrote_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "lake" / "inbox").mkdir(parents=True)  # nothing to read
    p = Pipeline("empty_inbox")

    @p.flow(name="copy", input=FilesInput("inbox", "json", SCHEMA),
            output=DeltaOutput("gold", "copy"))  # fmt: skip
    def copy(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    run_pipeline(p, settings_for(tmp_path), trigger="available-now")

    (checkpoint,) = (tmp_path / "checkpoints").glob("**/copy")
    assert CheckpointLog(checkpoint).planned == []  # the flow ran no batch
    table = read_delta(tmp_path / "lake" / "gold" / "copy")
    assert table.num_rows == 0
    assert table.schema.names == ["id", "amount"]


def test_a_run_of_the_one_flow_that_ends_returns_though_another_flow_lasts(
    spark: SparkSession, tmp_path: Path
) -> None:
    p = Pipeline("one_of_two")

    @p.flow(name="once", input=_inbox(tmp_path), output=DeltaOutput("silver", "once"),
            trigger="available-now")  # fmt: skip
    def once(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    @p.flow(name="lasting", input=DeltaInput("silver", "once"),
            output=DeltaOutput("gold", "lasting"), trigger="1 second")  # fmt: skip
    def lasting(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    done, stop = threading.Event(), threading.Event()

    def run() -> None:
        run_pipeline(p, settings_for(tmp_path), flows=["once"], stop=stop)
        done.set()

    runs = threading.Thread(target=run)
    runs.start()
    runs.join(timeout=120)
    ended = done.is_set()
    stop.set()  # a run that waits for a stop instead of ending stops here
    runs.join(timeout=60)
    assert ended, "the run of a flow that ends waited for a stop"
    assert read_delta(tmp_path / "lake" / "silver" / "once").num_rows == 1
    # The other flow was planned (validated), never started.
    assert not list((tmp_path / "checkpoints").glob("**/lasting/offsets/*"))


def test_a_run_that_lasts_creates_every_output_before_its_queries_start(
    spark: SparkSession, tmp_path: Path
) -> None:
    p = _two_levels(tmp_path, "lasting", DeltaOutput("gold", "leaf"))
    with running_pipeline(p, settings_for(tmp_path), trigger="1 second"):
        # Served once the plan is built, before the queries start: the leaf is there.
        assert read_delta(tmp_path / "lake" / "gold" / "leaf").num_rows == 0
        # The run's services are up by then, the driver's C-heap trim among them.
        assert TRIM_THREAD in _threads()
    assert TRIM_THREAD not in _threads()


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate()}
