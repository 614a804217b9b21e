"""Operating a pipeline on the real broker: lag in /metrics and `eventlake status` while a
backlog drains and on a stopped pipeline, every metric, checkpoint reset, the dashboard in
headless Chromium, and watermark advice from `eventlake lateness`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import timedelta
from functools import partial
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from eventlake.generator.base import send
from eventlake.generator.clicks import ClicksConfig, ClicksGenerator
from eventlake.testing import running_pipeline, settings_for, wait_until
from eventlake.testing.browser import rendered_dom, screenshot
from tests.integration.cli_helpers import run_cli, write_config

pytestmark = pytest.mark.integration

FLOWS = ["clicks", "quarantine"]
#: Every metric the issue names (counters without `_total`, as the parser names them).
METRICS = (
    "eventlake_input_rows",
    "eventlake_processed_rows",
    "eventlake_batch_duration_seconds",
    "eventlake_watermark_seconds",
    "eventlake_state_rows",
    "eventlake_state_bytes",
    "eventlake_rows_dropped_by_watermark",
    "eventlake_late_rows_kept",
    "eventlake_quarantined_rows",
    "eventlake_kafka_lag_records",
    "eventlake_kafka_lag_seconds",
    "eventlake_last_batch_id",
    "eventlake_last_commit_timestamp_seconds",
)
ARTIFACTS = Path(os.environ.get("EVENTLAKE_TEST_ARTIFACTS", ".eventlake/test-artifacts"))


def value(families: dict[str, list[Any]], name: str, **labels: str) -> float:
    """The one sample of ``name`` (plain, not a histogram part) with ``labels``."""
    found = [s.value for s in families[name]
             if s.name in (name, f"{name}_total")
             and labels.items() <= s.labels.items()]  # fmt: skip
    assert len(found) == 1, (name, labels, families.get(name))
    return float(found[0])


def lag_by_partition(families: dict[str, list[Any]], flow: str) -> dict[int, float]:
    return {int(s.labels["partition"]): s.value for s in families["eventlake_kafka_lag_records"]
            if s.labels["flow"] == flow}  # fmt: skip


def cli_status(cfg: Path) -> dict[str, Any]:
    done = run_cli("--config", str(cfg), "status", "clickstream", "--format", "json")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def _consumer_groups(bootstrap: str) -> tuple[list[str]] | None:
    """The ids of the cluster's consumer groups, None when the listing timed out (asked
    again: a listing under the suite's load once took over 30 s)."""
    try:
        listed = (
            AdminClient({"bootstrap.servers": bootstrap})
            .list_consumer_groups(request_timeout=20)
            .result(30)
        )
    except FutureTimeout:
        return None
    return ([g.group_id for g in listed.valid],)


def flow(status: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in status["flows"] if f["flow"] == name)


def test_lag_falls_to_zero_and_counts_records_produced_to_a_stopped_pipeline(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=3, prefix="ops")
    sent = send(bootstrap, topic, ClicksGenerator(
        ClicksConfig(seed=5, malformed_fraction=0.05, duplicate_fraction=0.02)
    ).records(3000))  # fmt: skip
    params = dict(topic=topic, max_offsets_per_trigger=150, trigger="1 second")
    settings = settings_for(tmp_path, bootstrap, clickstream=params, examples=True)
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, clickstream=params)

    with running_pipeline("clickstream", settings, flows=FLOWS) as run:
        # A backlog of 3000 records in batches of 150: behind at first.
        backlog = wait_until(
            lambda: (m := run.metrics()) and sum(lag_by_partition(m, "clicks").values()) and m,
            timeout=60, what="lag in /metrics",
        )  # fmt: skip
        assert sum(lag_by_partition(backlog, "clicks").values()) > 0
        live = cli_status(cfg)
        assert live["source"].startswith("metrics endpoint")
        assert flow(live, "clicks")["running"]
        assert flow(live, "clicks")["lag_records"] > 0

        def caught_up() -> dict[str, list[Any]] | None:
            m = run.metrics()
            lags = [*lag_by_partition(m, "clicks").values(),
                    *lag_by_partition(m, "quarantine").values()]  # fmt: skip
            read = value(m, "eventlake_input_rows", flow="quarantine")
            return m if read == 3000 and len(lags) == 6 and not any(lags) else None

        done = wait_until(caught_up, timeout=240, what="both flows to catch up")
        caught = cli_status(cfg)
        # Its checkpoints are in use: reset refuses, even with --yes.
        busy = run_cli("--config", str(cfg), "checkpoint", "reset", "clickstream.clicks", "--yes")
        assert busy.returncode == 1
        assert "EL-CHECKPOINT-002" in busy.stderr
        assert "is running" in busy.stderr
        assert [flow(caught, f)["lag_records"] for f in FLOWS] == [0, 0]
        assert flow(caught, "quarantine")["quarantined_rows"] == sent["malformed"]

    # Every metric, labelled by pipeline and flow, with the run's own figures.
    assert set(METRICS) <= set(done)
    for name in METRICS:
        assert {s.labels["pipeline"] for s in done[name]} == {"clickstream"}, name
    assert value(done, "eventlake_input_rows", flow="clicks") == 3000
    assert value(done, "eventlake_quarantined_rows", flow="quarantine") == sent["malformed"]
    assert value(done, "eventlake_processed_rows", flow="quarantine") == sent["malformed"]
    assert value(done, "eventlake_last_batch_id", flow="clicks") >= 19  # 3000 / 150 - 1
    assert value(done, "eventlake_state_rows", flow="clicks") > 0
    assert value(done, "eventlake_watermark_seconds", flow="clicks") > 1.7e9  # 2026 event times
    durations = [s for s in done["eventlake_batch_duration_seconds"]
                 if s.name.endswith("_count") and s.labels["flow"] == "clicks"]  # fmt: skip
    assert durations[0].value >= 20

    # Stopped: N more records in two partitions are exactly N records of lag there.
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in ((0, 7), (2, 4)):
        for i in range(count):
            producer.produce(topic, value=b"{}", key=f"k{i}".encode(), partition=partition)
    assert producer.flush(30) == 0
    stopped = cli_status(cfg)
    assert stopped["source"].startswith("checkpoints")
    assert not stopped["running"]
    for name in FLOWS:
        lags = {lag["partition"]: lag for lag in flow(stopped, name)["lag"]}
        assert {p: lag["records"] for p, lag in lags.items()} == {0: 7, 1: 0, 2: 4}
        assert lags[0]["seconds"] > 0
        assert lags[2]["seconds"] > 0
        assert lags[1]["seconds"] == 0
        assert flow(stopped, name)["in_flight"] is None
    outputs = flow(stopped, "quarantine")["outputs"]
    assert outputs == {"delta:silver/clicks_quarantine": sent["malformed"]}
    # Lag was read by assignment only: no consumer group of eventlake's on the cluster.
    [groups] = wait_until(partial(_consumer_groups, bootstrap), timeout=120, what="the groups")
    assert not [g for g in groups if g.startswith("eventlake")]

    # Reset: refused without --yes, saying what would be read again; then done.
    checkpoint = tmp_path / "checkpoints" / "clickstream" / "quarantine"
    refused = run_cli("--config", str(cfg), "checkpoint", "reset", "clickstream.quarantine")
    assert refused.returncode == 1
    assert "EL-CHECKPOINT-002" in refused.stderr
    assert f"kafka:{topic}: 3011 records from the earliest offset" in refused.stdout
    assert checkpoint.is_dir()
    reset = run_cli("--config", str(cfg), "checkpoint", "reset", "clickstream.quarantine", "--yes")
    assert reset.returncode == 0, reset.stderr
    assert not checkpoint.exists()


class _Cards(HTMLParser):
    """Text of each `.flow` card (by data-flow) and of each element with a class."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: dict[str, dict[str, str]] = {}
        self.texts: dict[str, list[str]] = {}
        self._card: str | None = None
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div" and "flow" in (a.get("class") or "").split():
            self._card = a.get("data-flow")
            self.cards[self._card or ""] = {}
        self._open.append((a.get("class") or "").split(" ")[0] or None)

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        cls = self._open[-1] if self._open else None
        if cls is None or not data.strip():
            return
        self.texts.setdefault(cls, []).append(data.strip())
        if self._card is not None:
            self.cards[self._card][cls] = data.strip()


def test_dashboard_in_chromium_and_lateness_advice(
    spark: SparkSession, bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    # One partition: arrival order is the order produced. 5% of events are 20 minutes late,
    # out-of-order ones at most 3 minutes; the watermark allows 10 minutes.
    topic = make_topic(partitions=1, prefix="late")
    sent = send(bootstrap, topic, ClicksGenerator(ClicksConfig(
        seed=9, late_fraction=0.05, late_delay=timedelta(minutes=20), out_of_order_fraction=0.05,
        out_of_order_max=timedelta(minutes=3), malformed_fraction=0.02,
    )).records(2000))  # fmt: skip
    params = dict(topic=topic, trigger="1 second", watermark="10 minutes")
    settings = settings_for(tmp_path, bootstrap, clickstream=params, examples=True)
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, clickstream=params)

    with running_pipeline("clickstream", settings, flows=FLOWS) as run:
        wait_until(
            lambda: all(f["lag"] and f["lag_records"] == 0 and f["last_batch"] is not None
                        for f in run.status()["flows"] if f["flow"] in FLOWS),
            timeout=180, what="both flows to catch up",
        )  # fmt: skip
        # The tables panel is read at most every 5 s, and chromium runs the page on virtual
        # time: the report must already hold batch 0's files when the page loads.
        wait_until(
            lambda: any(t["table"] == "silver/clicks" and (t["files"] or 0) >= 1
                        for t in run.status().get("tables", [])),
            timeout=30, what="silver/clicks's files in the status record",
        )  # fmt: skip
        url = run.url + "?lateness=clicks"
        page = _Cards()
        page.feed(rendered_dom(url, wait_ms=20000))
        shot = screenshot(url, ARTIFACTS / "dashboard.png", size=(1400, 1500), wait_ms=20000)

    # The page shows the pipeline's flows as they run, with the run's own figures.
    assert set(FLOWS) <= set(page.cards), page.cards
    assert page.texts["running"] == ["running"]  # the header's state
    quarantine, clicks = page.cards["quarantine"], page.cards["clicks"]
    assert quarantine["status"] == "running"
    assert clicks["status"] == "running"
    assert quarantine["quarantined"] == f"{sent['malformed']:,}"
    assert quarantine["output-rows"] == f"{sent['malformed']:,}"
    assert clicks["lag-records"] == "0"
    assert quarantine["lag-records"] == "0"
    assert int(clicks["state-rows"].replace(",", "")) > 0
    assert clicks["watermark"].startswith("20")
    # Its lateness panel, measured on load: a delay covering the 20 late minutes.
    advice = " ".join(page.texts["lateness-text"])
    keep = re.search(r"A delay of (\d+)s keeps 99%", advice)
    assert keep is not None, advice
    assert int(keep.group(1)) >= 20 * 60, advice
    assert shot.stat().st_size > 20_000
    # Its tables panel: each table the flows write, with its files as the log has them.
    tables = dict(zip(page.texts["table-name"], page.texts["table-files"], strict=True))
    assert {"silver/clicks", "silver/clicks_quarantine"} <= set(tables), tables
    assert int(tables["silver/clicks"].replace(",", "")) >= 1

    # The CLI's numbers, against the generator's: the 20-minute-late events and only
    # they are beyond the 10-minute watermark.
    done = run_cli("--config", str(cfg), "lateness", "clickstream.clicks", "--format", "json")
    assert done.returncode == 0, done.stderr
    [found] = json.loads(done.stdout)
    with_time = sent["valid"] + sent["late"] + sent["out_of_order"]
    assert found["column"] == "event_time"
    assert found["records"] == with_time
    assert found["keep_99"] >= 20 * 60
    assert found["keep_99_9"] >= 20 * 60
    assert found["configured_seconds"] == 600
    assert found["dropped"] == sent["late"]
    assert found["drop_rate"] == pytest.approx(sent["late"] / with_time)

    # The checkpoint inspector reads the de-duplication state through Spark's state data
    # source: the rows the last batch's progress reported.
    shown = run_cli("--config", str(cfg), "checkpoint", "show", "clickstream.clicks",
                    "--format", "json")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    [state] = report["state"]
    assert state["operator"] == "dedupeWithinWatermark"
    assert "event_id" in state["key_schema"]
    assert state["rows"] == report["progress"]["state_rows"] > 0
    assert state["bytes_on_disk"] > 0
    assert report["fingerprint"]["stateful"] == ["DeduplicateWithinWatermark"]
    assert report["in_flight"] is None
    assert report["batches"][-1]["sources"][0]["kind"] == "kafka"

    # The whole pipeline at once: each flow that ran, and the flows that never did.
    every = run_cli("--config", str(cfg), "checkpoint", "show", "clickstream", "--no-state",
                    "--format", "json")  # fmt: skip
    assert every.returncode == 0, every.stderr
    whole = json.loads(every.stdout)
    assert whole["pipeline"] == "clickstream"
    assert sorted(f["flow"] for f in whole["flows"]) == [f"clickstream.{f}" for f in FLOWS]
    never = {"user_clicks_5min", "user_sessions", "user_sessions_custom"}
    assert sorted(whole["without_checkpoint"]) == sorted(f"clickstream.{f}" for f in never)
    [shown_clicks] = [f for f in whole["flows"] if f["flow"] == "clickstream.clicks"]
    assert shown_clicks["batches"] == report["batches"]
    assert shown_clicks["state"] == []  # --no-state
    text = run_cli("--config", str(cfg), "checkpoint", "show", "clickstream", "--no-state")
    assert text.returncode == 0, text.stderr
    assert "clickstream.quarantine  checkpoint" in text.stdout
    assert "no checkpoint yet (never run): " in text.stdout


def test_console_shows_progress_and_the_log_file_keeps_spark_output(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(prefix="quiet")
    send(bootstrap, topic, ClicksGenerator(ClicksConfig(seed=2)).records(300))
    log = tmp_path / "logs" / "run.log"
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, clickstream={"topic": topic})
    cfg.write_text(cfg.read_text() + f"log:\n  file: {log}\n")
    # transformWithState's Python worker prints a line for each call it serves.
    done = run_cli("--config", str(cfg), "run", "clickstream", "--flow", "clicks",
                   "--flow", "user_sessions_custom", "--trigger", "available-now")  # fmt: skip
    assert done.returncode == 0, done.stderr
    console = done.stdout + done.stderr
    assert f"Spark and library logs: {log}" in console
    assert "[clickstream.user_sessions_custom] batch 0:" in console
    assert "Python worker" not in console
    assert " WARN " not in console
    assert "Streaming TransformWithStateInPandas Python worker" in log.read_text()
