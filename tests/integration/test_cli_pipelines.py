"""`eventlake list | run | validate` as a user runs them: fail fast, user modules."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlake.secrets import MASK
from eventlake.testing import free_port
from tests.integration.cli_helpers import run_cli, write_config

pytestmark = pytest.mark.integration

USER_MODULE = '''
from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.pipelines import Pipeline
from pyspark.sql import functions as F

clicks = Pipeline("user_clicks", description="a user's own pipeline")


@clicks.flow(input=KafkaInput(), output=DeltaOutput("bronze", "user_clicks"))
def raw(ctx, df):
    """Clicks as text, upper-cased page."""
    rows = kafka_records(df)
    return rows.withColumn("page", F.upper(F.get_json_object("value", "$.page")))
'''


def test_user_module_is_listed_and_needs_its_module(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic = make_topic(partitions=2, prefix="clicks")
    module = tmp_path / "my_pipelines.py"
    module.write_text(USER_MODULE)
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, user_clicks={"topic": topic})

    listed = run_cli("--config", str(cfg), "list", "--module", str(module))
    assert listed.returncode == 0, listed.stderr
    assert "user_clicks" in listed.stdout
    assert "orders" in listed.stdout  # the shipped pipelines stay listed
    # Each flow with its delivery guarantee, from the output's type.
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line.startswith("  ")}
    assert (
        f"kafka:{topic} -> delta:bronze/user_clicks  (append, exactly-once)"
        in lines["user_clicks.raw"]
    )
    assert "(append, at-least-once)" in lines["orders.high_value"]
    assert "(append, at-least-once)" in lines["users.silver"]  # a fan-out: its weakest target

    # Validating and running a user module through the CLI: test_readme_example.py.

    # Without --module the pipeline is unknown, and its config section is an error.
    unknown = run_cli("--config", str(cfg), "run", "user_clicks")
    assert unknown.returncode == 1
    assert "EL-CONFIG-003" in unknown.stderr
    assert "pipelines.user_clicks" in unknown.stderr


def test_unknown_config_key_fails_before_spark(tmp_path: Path, bootstrap: str) -> None:
    cfg = write_config(
        tmp_path / "el.yaml", bootstrap, tmp_path, orders={"topic": "x", "watermark_dealy": "1m"}
    )
    started = time.monotonic()
    result = run_cli("--config", str(cfg), "run", "orders")
    assert result.returncode == 1
    assert "EL-CONFIG-003" in result.stderr
    assert "pipelines.orders.watermark_dealy" in result.stderr
    assert "Fix:" in result.stderr
    assert time.monotonic() - started < 20

    top = run_cli("--config", str(cfg), "--set", "kafka.bootstrap=x", "config", "show")
    assert top.returncode == 1
    assert "kafka.bootstrap" in top.stderr


def test_unreachable_broker_fails_fast(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    cfg = write_config(tmp_path / "el.yaml", dead, tmp_path, orders={"topic": "orders"})
    started = time.monotonic()
    result = run_cli("--config", str(cfg), "run", "orders", "--trigger", "available-now")
    assert result.returncode == 1
    assert "EL-KAFKA-003" in result.stderr
    assert dead in result.stderr
    assert "eventlake kafka start" in result.stderr
    assert time.monotonic() - started < 30


def test_missing_topic_fails_fast_naming_topic_and_fix(bootstrap: str, tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path / "el.yaml", bootstrap, tmp_path,
        orders={"topic": "no-such-orders", "high_value_topic": "no-such-high"},
    )  # fmt: skip
    result = run_cli("--config", str(cfg), "run", "orders")
    assert result.returncode == 1
    assert "EL-KAFKA-004" in result.stderr
    assert "'no-such-orders'" in result.stderr
    assert "orders.bronze" in result.stderr
    assert "eventlake kafka create-topic" in result.stderr


def test_validate_and_config_show_mask_secrets(
    bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, orders={"topic": "any"})
    monkeypatch.setenv("EL_TEST_PASSWORD", "s3cret-value")
    shown = run_cli(
        "--config", str(cfg), "--set", "kafka.sasl_password=${EL_TEST_PASSWORD}", "config", "show"
    )
    assert shown.returncode == 0, shown.stderr
    assert "s3cret-value" not in shown.stdout
    assert f"sasl_password: '{MASK}'" in shown.stdout

    valid = run_cli("--config", str(cfg), "validate", "orders")
    assert valid.returncode == 0, valid.stderr
    assert "pipeline 'orders' is valid: 7 flow(s)" in valid.stdout
    # validate works on a scratch lake: the real one stays untouched.
    assert not (tmp_path / "lake").exists()


def test_generate_orders_is_reproducible_and_counts_kinds(bootstrap: str) -> None:
    from eventlake.generator import OrdersConfig, OrdersGenerator
    from eventlake.kafka import topic_offsets
    from eventlake.testing import unique_name

    topic = unique_name("gen")
    args = ("generate", "orders", "--topic", topic, "--count", "400", "--seed", "9",
            "--malformed-fraction", "0.1", "--duplicate-fraction", "0.05",
            "--partitions", "2", "--bootstrap-servers", bootstrap)  # fmt: skip
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    truth = Counter(
        r.kind
        for r in OrdersGenerator(
            OrdersConfig(seed=9, malformed_fraction=0.1, duplicate_fraction=0.05)
        ).records(400)
    )
    detail = ", ".join(f"{k} {v}" for k, v in sorted(truth.items()))
    assert f"produced 400 records to '{topic}'" in result.stdout
    assert detail in result.stdout
    offsets = topic_offsets(bootstrap, topic)
    assert len(offsets) == 2
    assert sum(offsets.values()) == 400

    neither = run_cli("generate", "orders", "--topic", topic)
    assert neither.returncode == 1
    assert "--count" in neither.stderr


def test_generate_event_streams_are_reproducible_by_seed(bootstrap: str) -> None:
    """`eventlake generate clicks | sensors | impressions`: the same seed gives the same
    records, with late, out-of-order, duplicate and malformed ones among them."""
    from eventlake.testing import unique_name
    from tests.integration.event_time_helpers import read_records

    mix = ("--late-fraction", "0.05", "--out-of-order-fraction", "0.1",
           "--duplicate-fraction", "0.05", "--malformed-fraction", "0.05")  # fmt: skip
    for kind in ("clicks", "sensors", "impressions"):
        runs = []
        for _ in range(2):
            topic = unique_name(kind)
            extra = ("--clicks-topic", f"{topic}-clicks") if kind == "impressions" else ()
            result = run_cli("generate", kind, "--topic", topic, "--count", "300", "--seed", "7",
                             "--partitions", "2", "--bootstrap-servers", bootstrap, *mix,
                             *extra)  # fmt: skip
            assert result.returncode == 0, result.stderr
            summary = result.stdout.splitlines()[0]
            assert f"produced 300 records to '{topic}'" in summary
            for label in ("late", "out_of_order", "duplicate", "malformed", "valid"):
                assert f"{label} " in summary, (kind, summary)
            runs.append(topic)
        topics = [runs] + ([[f"{t}-clicks" for t in runs]] if kind == "impressions" else [])
        for first, second in topics:
            values = [sorted(v or b"" for *_, v in read_records(bootstrap, t))
                      for t in (first, second)]  # fmt: skip
            assert values[0] == values[1], kind
            assert len(values[0]) >= 50
