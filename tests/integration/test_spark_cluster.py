"""Pipelines on a real Spark standalone cluster (a master and two workers started by
``eventlake cluster start``) whose executors' Python has no eventlake: eventlake and the
user's module reach them through the code eventlake ships."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from eventlake.checkpoints import CheckpointLog
from eventlake.cluster import SparkStandaloneCluster
from eventlake.cluster.standalone import UI_PORT_CONF, spark_home
from eventlake.config import PostgresSettings
from eventlake.generator import CdcConfig, CdcGenerator, send
from eventlake.generator.clicks import ClicksConfig, ClicksGenerator
from eventlake.jvm_code import spark_jars
from eventlake.kafka import produce
from eventlake.storage import Location
from eventlake.testing import read_delta, unique_name, wait_until
from eventlake.testing.watermark import EPOCH
from tests.integration.cli_helpers import cli_command, run_cli, write_config
from tests.integration.clickstream_expected import (
    CLICK_FIELDS,
    assert_clickstream_tables,
    kept_clicks,
)
from tests.integration.event_time_helpers import read_topic
from tests.integration.test_users_pipeline import assert_matches

pytestmark = pytest.mark.integration

SHIPPED_MODULE = Path(__file__).parent / "shipped_pipeline.py"
QUIET_MODULE = Path(__file__).parent / "quiet_pipeline.py"


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python as a cluster node would have: pyspark's, pandas' and pyarrow's libraries,
    no eventlake. A venv whose ``.pth`` lists this environment's site-packages: Python
    adds that folder to its path but does not run the ``.pth`` files in it, so the
    editable install of eventlake (an import hook run from a ``.pth``) is not there."""
    folder = tmp_path_factory.mktemp("executor-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "host-libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def cluster_config(
    path: Path,
    bootstrap: str,
    root: Path,
    cluster: SparkStandaloneCluster,
    python: Path,
    **sections: Any,
) -> Path:
    """A config running on ``cluster``, executors on ``python``, partitions left to
    eventlake."""
    write_config(path, bootstrap, root, **sections)
    config = yaml.safe_load(path.read_text())
    config["spark"] = {
        "master": cluster.master_url,
        "conf": {
            UI_PORT_CONF: str(cluster.ui_port),
            "spark.pyspark.python": str(python),
            "spark.executor.memory": "768m",
        },
    }
    path.write_text(yaml.safe_dump(config))
    return path


def applications(cluster: SparkStandaloneCluster) -> dict[str, set[str]]:
    """Each worker's applications: the folders its executors ran in."""
    return {
        w: {app.name for app in (cluster.data_dir / w).glob("app-*")}
        for w in ("worker-1", "worker-2")
    }


def run_on_cluster(
    cluster: SparkStandaloneCluster, config: Path, pipeline: str, *extra: str
) -> str:
    """Run ``pipeline`` available-now on the cluster; the application's id, which every
    worker ran executors for."""
    before = applications(cluster)
    result = run_cli("--config", str(config), "run", pipeline, "--trigger", "available-now",
                     "--quiet", *extra, timeout=900)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    new = {w: apps - before[w] for w, apps in applications(cluster).items()}
    assert len(new["worker-1"]) == 1, new
    assert new["worker-1"] == new["worker-2"], new
    return new["worker-1"].pop()


def shuffle_partitions(checkpoint: Path) -> int:
    offsets = (checkpoint / "offsets" / "0").read_text().splitlines()
    return int(json.loads(offsets[1])["conf"]["spark.sql.shuffle.partitions"])


def test_executor_python_has_no_eventlake(executor_python: Path) -> None:
    # Run elsewhere than the checkout, as executors do (in their work folders).
    imports = subprocess.run([str(executor_python), "-c", "import eventlake"],
                             capture_output=True, text=True, check=False,
                             cwd=executor_python.parent)  # fmt: skip
    assert imports.returncode != 0
    assert "No module named 'eventlake'" in imports.stderr
    libraries = subprocess.run(
        [str(executor_python), "-c", "import pyspark, pandas, pyarrow"], check=False
    )
    assert libraries.returncode == 0


def test_cluster_status_shows_two_alive_workers(spark_cluster: SparkStandaloneCluster) -> None:
    shape = ["--workers", "2", "--cores", "1", "--memory", "1g", "--port",
             str(spark_cluster.port), "--ui-port", str(spark_cluster.ui_port), "--data-dir",
             str(spark_cluster.data_dir)]  # fmt: skip
    shown = run_cli("cluster", "status", *shape)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = [line.split("\t") for line in shown.stdout.splitlines()]
    assert lines[0][0] == f"master {spark_cluster.master_url}"
    assert lines[0][1].startswith("running (pid ")
    assert [(w[0], w[1].split(" ")[0], w[2]) for w in lines[1:]] == [
        ("worker-1", "ALIVE", "1 cores"), ("worker-2", "ALIVE", "1 cores"),
    ]  # fmt: skip
    wrong = run_cli("cluster", "start", *shape[:1], "3", *shape[2:])
    assert wrong.returncode != 0
    assert "EL-CLUSTER-001" in wrong.stderr
    assert "was created with --workers 2 --cores 1 --memory 1g" in wrong.stderr


def test_clickstream_on_the_cluster_equals_the_batch_by_batch_truth(
    spark_cluster: SparkStandaloneCluster,
    executor_python: Path,
    bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """Every table the cluster's run wrote holds what the independent computation from the
    topic's records and the run's batches gives (tests/integration/clickstream_expected.py),
    the watermark of each batch included."""
    topic = make_topic(partitions=2, prefix="clicks-cluster")
    gen = ClicksGenerator(ClicksConfig(
        seed=17, late_fraction=0.05, out_of_order_fraction=0.1, duplicate_fraction=0.05,
        malformed_fraction=0.03,
    ))  # fmt: skip
    send(bootstrap, topic, gen.records(900))
    params = {"topic": topic, "max_offsets_per_trigger": 200}
    config = cluster_config(tmp_path / "cluster.yaml", bootstrap, tmp_path / "cluster",
                            spark_cluster, executor_python, clickstream=params)  # fmt: skip
    run_on_cluster(spark_cluster, config, "clickstream")
    # The driver served the executors eventlake's code from its scratch folder (beside
    # the logs), where no /tmp cleaner removes it under a long run.
    shipped = list((tmp_path / "cluster" / "scratch").glob("*/code/eventlake-code-*.zip"))
    assert len(shipped) == 1, shipped

    checkpoints = tmp_path / "cluster" / "checkpoints" / "clickstream"
    records = read_topic(bootstrap, topic, CLICK_FIELDS, "event_time")
    kept, final_wm, wms = kept_clicks(records, topic, Location(checkpoints / "clicks"),
                                      timedelta(minutes=10))  # fmt: skip
    log = CheckpointLog(checkpoints / "clicks")
    assert [EPOCH + timedelta(milliseconds=log.watermark_ms(b)) for b in log.planned] == wms
    # transformWithState (a Python processor) and the quarantine among them.
    assert_clickstream_tables(tmp_path / "cluster" / "lake", records, kept, final_wm)
    # One shuffle and state partition per core of the cluster, not Spark's 200.
    checkpoint = checkpoints / "user_sessions_custom"
    assert shuffle_partitions(checkpoint) == spark_cluster.status().cores == 2
    assert sorted(p.name for p in (checkpoint / "state" / "0").iterdir() if p.name.isdigit()) == [
        "0",
        "1",
    ]


def assert_shouted_on_executors(lake: Path, values: list[str], app: str, python: Path) -> None:
    rows = read_delta(lake / "silver" / "shouted").to_pylist()
    assert sorted(r["shouted"] for r in rows) == sorted(v.upper() for v in values)
    origins = [r["origin"].split("|") for r in rows]
    # The UDF ran in the executors' Python, importing eventlake and the module from the
    # zip the driver shipped into the application's folder on the worker.
    assert {o[0] for o in origins} == {str(python)}
    for _python, package, module, _pid in origins:
        assert f"/{app}/" in package
        assert package.endswith(".zip/eventlake/__init__.py")
        assert f"/{app}/" in module
        assert ".zip/eventlake_user_shipped_pipeline_" in module


def test_spark_submit_runs_the_cli_on_the_cluster(
    spark_cluster: SparkStandaloneCluster,
    executor_python: Path,
    bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """spark-submit's --master and --jars win over the config (which names no master:
    eventlake's default is local[*]); a --module UDF runs on executors whose Python lacks
    eventlake, from the zip eventlake shipped; eventlake's JVM processor, from its jar in
    --jars."""
    topic = make_topic(partitions=2, prefix="submitted")
    values = [f"submitted-{i % 20}" for i in range(30)]  # 10 repeated
    produce(bootstrap, topic, [(None, v) for v in values])
    config = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, shipped={"topic": topic})
    raw = yaml.safe_load(config.read_text())
    raw["spark"] = {"conf": {UI_PORT_CONF: str(spark_cluster.ui_port)}}
    config.write_text(yaml.safe_dump(raw))
    entry = run_cli("submit-file")
    assert entry.returncode == 0, entry.stderr
    jars = ",".join(str(j) for j in spark_jars())
    before = applications(spark_cluster)
    submitted = subprocess.run(
        [str(spark_home() / "bin" / "spark-submit"), "--master", spark_cluster.master_url,
         "--jars", jars, "--conf", f"spark.pyspark.driver.python={sys.executable}",
         "--conf", f"spark.pyspark.python={executor_python}",
         "--conf", "spark.executor.memory=768m", entry.stdout.strip(),
         "--config", str(config), "run", "shipped", "--module", str(SHIPPED_MODULE),
         "--trigger", "available-now", "--quiet"],
        capture_output=True, text=True, timeout=900, check=False,
        env={**os.environ, "SPARK_HOME": str(spark_home())},
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr[-5000:]
    (app,) = applications(spark_cluster)["worker-1"] - before["worker-1"]
    assert_shouted_on_executors(tmp_path / "lake", values, app, executor_python)
    checkpoint = tmp_path / "checkpoints" / "shipped" / "shouted"
    assert shuffle_partitions(checkpoint) == 2
    # The executors ran eventlake's de-duplication processor from its jar: each value once.
    first = read_delta(tmp_path / "lake" / "silver" / "first_values").to_pylist()
    assert sorted(r["value"] for r in first) == sorted(set(values))


def test_users_cdc_on_the_cluster_matches_the_independent_computation(
    spark_cluster: SparkStandaloneCluster,
    executor_python: Path,
    bootstrap: str,
    make_topic: Callable[..., str],
    postgres: PostgresSettings,
    tmp_path: Path,
) -> None:
    topic, state = make_topic(partitions=3, prefix="cdc-cluster"), make_topic(prefix="state")
    table = unique_name("users_cluster").replace("-", "_")
    records = list(CdcGenerator(CdcConfig(seed=23, users=25, out_of_order_fraction=0.15,
                                          duplicate_fraction=0.08,
                                          malformed_fraction=0.03)).records(600))  # fmt: skip
    send(bootstrap, topic, records)
    users = {"topic": topic, "state_topic": state, "postgres_table": table,
             "max_offsets_per_trigger": 400}  # fmt: skip
    pg = {"port": postgres.port, "password": "${EVENTLAKE_TEST_PG_PASSWORD}"}
    config = cluster_config(tmp_path / "cluster.yaml", bootstrap, tmp_path, spark_cluster,
                            executor_python, postgres=pg, users=users)  # fmt: skip
    run_on_cluster(spark_cluster, config, "users")
    # The same checks the local run passes (test_users_pipeline): SCD1, SCD2, PostgreSQL
    # and the quarantine, each against an independent computation from the records.
    assert_matches(tmp_path, records, postgres, table)


def test_idle_timeout_closes_windows_on_the_cluster(
    spark_cluster: SparkStandaloneCluster,
    executor_python: Path,
    bootstrap: str,
    make_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """The idle decision is the driver's (the run's watch and the heartbeat source's
    reader): executors whose Python has no eventlake and no view of the checkpoint run the
    windows, and the quiet topic's last windows close."""
    topic = make_topic(prefix="quiet-cluster")
    start = (datetime.now(UTC) - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    at = [start + timedelta(minutes=m) for m in (1, 2, 12)]
    produce(bootstrap, topic, [("u", json.dumps({"user": "u", "ts": t.isoformat()})) for t in at])
    params = {"topic": topic, "trigger": "1 second", "idle_timeout": "5 seconds"}
    config = cluster_config(tmp_path / "cluster.yaml", bootstrap, tmp_path, spark_cluster,
                            executor_python, quiet=params)  # fmt: skip
    table = tmp_path / "lake" / "gold" / "clicks_10min"

    def written() -> int:
        try:
            return read_delta(table).num_rows
        except Exception:  # not created yet
            return 0

    proc = subprocess.Popen(
        cli_command("--config", str(config), "run", "quiet", "--quiet",
                    "--module", str(QUIET_MODULE)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: written() >= 2 or proc.poll() is not None, timeout=300,
                   what="the quiet topic's windows closed on the cluster")  # fmt: skip
        assert proc.poll() is None, proc.communicate()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    rows = read_delta(table).to_pylist()
    got = sorted((r["window"]["start"].replace(tzinfo=UTC), r["count"]) for r in rows)
    assert got == [(start, 2), (start + timedelta(minutes=10), 1)]
