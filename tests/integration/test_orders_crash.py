"""Exactly-once under crashes: SIGKILL `eventlake run` three times mid-stream, restart on
the same checkpoints, and every Delta table equals what it must hold, computed without
Spark: bronze from the topic as a plain consumer reads it, the others from the generator's
truth (tests/integration/orders_expected.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from eventlake.checkpoints import FINGERPRINT
from eventlake.generator import GeneratedRecord, OrdersConfig, OrdersGenerator, send
from eventlake.operations.status import PROGRESS_FILE
from eventlake.storage import Location, filesystem
from eventlake.testing import consume_records, read_delta, unique_name, wait_until
from eventlake.testing.hdfs import EmbeddedHdfs
from tests.integration.cli_helpers import cli_command, run_cli, write_config
from tests.integration.orders_expected import (
    HALF_HOUR,
    HOUR,
    as_set,
    expected_gold,
    expected_silver,
    silver_frame,
)

pytestmark = pytest.mark.integration

TABLES = {
    ("bronze", "orders"): ["key", "value", "topic", "partition", "offset", "kafka_timestamp"],
    ("silver", "orders"): ["order_id", "user_id", "category", "region", "amount", "event_time"],
    ("silver", "orders_quarantine"): ["key", "value", "partition", "offset", "reason"],
    ("gold", "revenue_hourly"): [
        "window_start", "window_end", "category", "order_count", "total_amount",
    ],
    ("gold", "category_orders_sliding"): [
        "window_start", "window_end", "category", "order_count",
    ],
}  # fmt: skip


def commits(root: Path | Location, flow: str) -> int:
    folder = Location(root) / "checkpoints" / "orders" / flow / "commits"
    return len([n for n in filesystem(folder).list_names(folder) if n.isdigit()])


def in_flight(root: Path | Location) -> dict[str, int]:
    """Flows whose last planned batch (offsets/N) has no commit, killed mid-batch: by flow,
    that batch."""
    out = {}
    flows = Location(root) / "checkpoints" / "orders"
    fs = filesystem(flows)
    for name in fs.list_names(flows):
        if not fs.is_dir(flows / name):
            continue
        planned = {int(n) for n in fs.list_names(flows / name / "offsets") if n.isdigit()}
        done = {int(n) for n in fs.list_names(flows / name / "commits") if n.isdigit()}
        if planned - done:
            out[name] = max(planned - done)
    return out


def shown_in_flight(cfg: Path) -> dict[str, int]:
    """The in-flight batch of each flow, as `eventlake checkpoint show orders` names it."""
    shown = run_cli("--config", str(cfg), "checkpoint", "show", "orders", "--no-state",
                    "--format", "json")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["pipeline"] == "orders"
    return {
        f["flow"].removeprefix("orders."): f["in_flight"]
        for f in report["flows"]
        if f["in_flight"] is not None
    }


Rows = Counter[tuple[Any, ...]]


def rows(root: Path | Location, layer: str, name: str, columns: list[str]) -> Rows:
    """A table's rows as delta-rs reads them (:func:`as_set`'s normal form)."""
    table = read_delta(Location(root) / "lake" / layer / name).select(columns).to_pandas()
    return as_set(table, columns)


def spark_rows(
    spark: SparkSession, root: Location, layer: str, name: str, columns: list[str]
) -> Rows:
    """The same, read by Spark (naive UTC timestamps, which :func:`as_set` takes as UTC)."""
    table = spark.read.format("delta").load(str(root / "lake" / layer / name))
    return as_set(pd.DataFrame([r.asDict() for r in table.select(columns).collect()]), columns)


def expected_tables(
    bootstrap: str, topic: str, sent: list[GeneratedRecord]
) -> dict[tuple[str, str], Rows]:
    """What each table of :data:`TABLES` must hold after ``sent`` went to ``topic``: bronze
    every record as a plain consumer reads it, silver and gold from the generator's truth,
    the quarantine the consumed records the generator made malformed, with its reason."""
    consumed = consume_records(bootstrap, topic)
    assert Counter((r.key, r.value) for r in consumed) == Counter((g.key, g.value) for g in sent)
    bronze = pd.DataFrame([
        {"key": r.key, "value": r.value, "topic": topic, "partition": r.partition,
         "offset": r.offset, "kafka_timestamp": pd.Timestamp(r.timestamp_ms, unit="ms", tz="UTC")}
        for r in consumed
    ])  # fmt: skip
    reasons = {(g.key, g.value): g.reason for g in sent if g.kind == "malformed"}
    quarantine = pd.DataFrame([
        {"key": r.key, "value": r.value, "partition": r.partition, "offset": r.offset,
         "reason": reasons[(r.key, r.value)]}
        for r in consumed if (r.key, r.value) in reasons
    ])  # fmt: skip
    exp = expected_silver([sent])
    frames = {
        ("bronze", "orders"): bronze,
        ("silver", "orders"): silver_frame(exp),
        ("silver", "orders_quarantine"): quarantine,
        ("gold", "revenue_hourly"): expected_gold(exp, HOUR, HOUR)[0],
        ("gold", "category_orders_sliding"): expected_gold(exp, HOUR, HALF_HOUR)[0],
    }
    want = {table: as_set(frames[table], columns) for table, columns in TABLES.items()}
    for (layer, name), table_rows in want.items():
        assert sum(table_rows.values()) > 0, f"{layer}/{name}: nothing expected"
    return want


def crash_three_times(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path, crashy: Location
) -> dict[tuple[str, str], Rows]:
    """Run orders on ``crashy`` (a lake and checkpoints root), SIGKILL it three times
    mid-stream, drain it on the same checkpoints; return what each table must hold."""
    topic, high = make_topic(partitions=3, prefix="crash"), make_topic(prefix="crash-high")
    params = {"topic": topic, "high_value_topic": high, "max_offsets_per_trigger": 400,
              "trigger": "1 second"}  # fmt: skip
    cfg = write_config(tmp_path / "el.yaml", bootstrap, str(crashy), orders=params)
    # No late orders: which late rows a window drops depends on batch boundaries, which the
    # kills move. Out-of-order orders (at most 3 minutes behind) stay within both delays.
    gen = OrdersGenerator(
        OrdersConfig(seed=21, out_of_order_fraction=0.05, duplicate_fraction=0.05,
                     malformed_fraction=0.04)
    )  # fmt: skip

    # Three crashes, each at a different moment: while bronze commits, while silver
    # commits, while gold commits; more input arrives before each restart.
    moments: list[tuple[str, int]] = [("bronze", 2), ("silver", 2), ("revenue_hourly", 1)]
    interrupted: list[str] = []
    # Each run's scratch folder (beside the logs, for a local root): a killed run's stays
    # behind, with what its JVM left there, until the next start removes it.
    scratch = crashy.path / "scratch" if crashy.is_local else None
    killed: list[Path] = []
    sent: list[GeneratedRecord] = []
    for flow, more in moments:
        batch = list(gen.records(1500))
        send(bootstrap, topic, batch)
        sent += batch
        before = commits(crashy, flow)
        proc = subprocess.Popen(
            cli_command("--config", str(cfg), "run", "orders", "--quiet"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        try:
            target = before + more

            def reached(f: str = flow, t: int = target, p: subprocess.Popen[bytes] = proc) -> bool:
                return commits(crashy, f) >= t or p.poll() is not None

            wait_until(reached, timeout=240, what=f"{flow} to commit {more} batch(es)")
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver: Python and its JVM
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        if scratch is not None:
            [left] = list(scratch.iterdir())
            assert any((left / "tmp").iterdir()), left
            killed.append(left)
        cut = in_flight(crashy)
        # The inspector names the batch each kill cut short, and no other.
        assert shown_in_flight(cfg) == cut
        interrupted += cut
    # At least one kill hit a batch between its offsets entry and its commit.
    assert interrupted

    # Restart on the same checkpoints and drain.
    drained = run_cli("--config", str(cfg), "run", "orders", "--trigger", "available-now", "-q")
    assert drained.returncode == 0, drained.stderr
    if scratch is not None:
        [drains] = list(scratch.iterdir())
        assert len(set(killed)) == 3
        assert drains not in killed
    return expected_tables(bootstrap, topic, sent)


def test_sigkill_three_times_then_every_table_as_computed_without_spark(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    crashy = Location(tmp_path / "crashy")
    want = crash_three_times(bootstrap, make_topic, tmp_path, crashy)
    for (layer, name), columns in TABLES.items():
        assert rows(crashy, layer, name, columns) == want[(layer, name)], f"{layer}/{name}"
    assert sum(rows(crashy, "bronze", "orders", ["offset"]).values()) == 4500


def test_sigkill_three_times_on_hdfs_then_every_table_as_computed_without_spark(
    spark: SparkSession,
    hdfs: EmbeddedHdfs,
    bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """The same, with lake.root and checkpoints.root on HDFS: the checkpoint logs, the
    fingerprint and the status files go through Hadoop's FileSystem API."""
    crashy = Location(f"{hdfs.uri}/{unique_name('crash')}")
    want = crash_three_times(bootstrap, make_topic, tmp_path, crashy)
    # Nothing of the run landed on the local disk.
    assert not (tmp_path / "crashy").exists()
    flows = crashy / "checkpoints" / "orders"
    assert filesystem(flows).is_file(flows / "bronze" / FINGERPRINT)
    assert filesystem(flows).is_file(flows / "bronze" / PROGRESS_FILE)
    for (layer, name), columns in TABLES.items():
        # Read back by Spark and, independently, by delta-rs (HDFS through hdfs-native).
        table = want[(layer, name)]
        assert spark_rows(spark, crashy, layer, name, columns) == table, f"{layer}/{name}"
        assert rows(crashy, layer, name, columns) == table, f"{layer}/{name} (delta-rs)"
    assert sum(rows(crashy, "bronze", "orders", ["offset"]).values()) == 4500


@pytest.mark.parametrize(
    ("signum", "to_group"),
    [(signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGINT, True)],
    ids=["sigterm-to-the-process", "sigterm-to-the-group", "sigint-to-the-group"],
)
def test_a_stop_signal_stops_every_flow_between_batches_and_exits_0(
    bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
    signum: signal.Signals,
    to_group: bool,
) -> None:
    """A stop signal to the process, or to its whole group as systemd
    (``KillMode=control-group``), a terminal's Ctrl-C or ``timeout`` send it (the JVM
    gets it too, and ignores it), ends the run cleanly: exit 0, no traceback, every flow
    on a committed batch."""
    topic, high = make_topic(partitions=3, prefix="term"), make_topic(prefix="term-high")
    params = {"topic": topic, "high_value_topic": high, "max_offsets_per_trigger": 300,
              "trigger": "2 seconds"}  # fmt: skip
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, orders=params)
    send(bootstrap, topic, OrdersGenerator(OrdersConfig(seed=3)).records(3000))
    proc = subprocess.Popen(
        cli_command("--config", str(cfg), "run", "orders"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(
            lambda: commits(tmp_path, "silver") >= 2 or proc.poll() is not None,
            timeout=240, what="silver to commit twice",
        )  # fmt: skip
        assert proc.poll() is None
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err.decode()
    assert f"{signum.name}: stopping at the next batch boundary" in err.decode()
    assert "Traceback" not in err.decode()
    assert "run of orders (stopped)" in out.decode()
    # Every flow ended on a committed batch: nothing planned and left half done.
    assert in_flight(tmp_path) == {}
    assert commits(tmp_path, "bronze") >= 1
