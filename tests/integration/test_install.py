"""eventlake as a data team adds it to its own project: the wheel installed into a fresh
venv outside this checkout, `eventlake init`, the project's own test, a run against a
broker the installed CLI starts, every jar downloaded from the lock into an empty cache,
and a pipeline of the project's own named `orders`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from eventlake.jars import BROKER_JARS, SPARK_JARS, locked
from eventlake.kafka import produce
from eventlake.testing import free_port, read_delta

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
MY_ORDERS = '''"""The project's own orders pipeline: the name is the project's, not eventlake's."""

from pyspark.sql import functions as F

from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.pipelines import Pipeline

orders = Pipeline("orders", description="our orders, as received")


@orders.flow(input=KafkaInput(), output=DeltaOutput("bronze", "our_orders"))
def raw(ctx, df):
    return kafka_records(df).withColumn("shop", F.lit("ours"))
'''


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_the_wheel_in_a_fresh_venv_runs_an_initialised_project(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    here = {**os.environ, "PYTHONUNBUFFERED": "1"}
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], cwd=ROOT, env=here)
    [wheel] = dist.glob("eventlake-*.whl")
    [sdist] = dist.glob("eventlake-*.tar.gz")
    _run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
         cwd=ROOT, env=here)  # fmt: skip
    names = zipfile.ZipFile(wheel).namelist()
    assert "eventlake/resources/jars.lock.json" in names
    assert "eventlake/resources/project/pipelines/events.py.tmpl" in names
    assert not [n for n in names if n.endswith(".jar") or n.startswith(("tests/", "bench/"))]

    # A venv of its own, the wheel (not editable) and pytest; nothing of this checkout.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=here)
    bin_dir = venv / "bin"
    pins = str(ROOT / "constraints.txt")
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "-c", pins, str(wheel), "pytest"],
         cwd=tmp_path, env=here)  # fmt: skip
    ours = ("VIRTUAL_ENV", "PYTHONPATH", "EVENTLAKE_JARS_DIR", "PYSPARK_PYTHON")
    env = {k: v for k, v in os.environ.items() if k not in ours}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", XDG_CACHE_HOME=str(tmp_path / "user-cache"),
               PYTHONUNBUFFERED="1")  # fmt: skip
    jar_cache = tmp_path / "user-cache" / "eventlake" / "jars"
    where = _run([str(bin_dir / "python"), "-c", "import eventlake; print(eventlake.__file__)"],
                 cwd=tmp_path, env=env)  # fmt: skip
    assert where.startswith(str(venv)), where
    version = _run([str(bin_dir / "eventlake"), "version"], cwd=tmp_path, env=env)
    assert re.search(rf"^jar cache\s+{re.escape(str(jar_cache))}$", version, re.M), version
    assert f"{len(locked(SPARK_JARS))} locked, {len(locked(SPARK_JARS))} to download" in version

    assert not jar_cache.exists()
    _run([str(bin_dir / "eventlake"), "init", "shop"], cwd=tmp_path, env=env)
    project = tmp_path / "shop"
    tested = _run([str(bin_dir / "pytest"), "-q", "-p", "no:cacheprovider"], cwd=project,
                  env=env)  # fmt: skip
    assert "1 passed" in tested
    # The project's first use of Spark and of the broker filled the empty cache from the lock.
    for kind in (SPARK_JARS, BROKER_JARS):
        assert all((jar_cache / jar.relative_path).is_file() for jar in locked(kind)), kind

    # The installed CLI's broker, the sample run over it, and the project's own `orders`.
    port = free_port()
    bootstrap = f"127.0.0.1:{port}"
    cli = [str(bin_dir / "eventlake"), "--set", f"kafka.bootstrap_servers={bootstrap}"]
    broker = ["--port", str(port), "--data-dir", str(tmp_path / "kafka")]
    _run([str(bin_dir / "eventlake"), "kafka", "start", *broker], cwd=project, env=env)
    try:
        for topic in ("events", "orders"):
            _run([str(bin_dir / "eventlake"), "kafka", "create-topic", topic, "--partitions",
                  "2", "--bootstrap-servers", bootstrap], cwd=project, env=env)  # fmt: skip
        events = [{"event_id": f"e{i}", "user_id": "u1", "kind": "view", "amount": float(i),
                   "event_time": f"2026-01-01T10:{i:02d}:00Z"} for i in range(20)]  # fmt: skip
        produce(bootstrap, "events", [(e["event_id"], json.dumps(e)) for e in events])
        produce(bootstrap, "orders", [(f"o{i}", json.dumps({"order_id": i})) for i in range(7)])
        (project / "pipelines" / "orders.py").write_text(MY_ORDERS)
        config = project / "eventlake.yaml"
        config.write_text(config.read_text() + "  orders:\n    topic: orders\n")

        listed = _run([*cli, "list"], cwd=project, env=env)
        assert "events.bronze" in listed
        assert "orders.raw" in listed
        assert "orders.silver" not in listed  # eventlake's example is not loaded
        assert "users" not in listed
        _run([*cli, "run", "events", "--trigger", "available-now"], cwd=project, env=env)
        _run([*cli, "run", "orders", "--trigger", "available-now"], cwd=project, env=env)
    finally:
        _run([str(bin_dir / "eventlake"), "kafka", "stop", *broker], cwd=project, env=env)

    lake = project / ".eventlake" / "lake"
    silver = read_delta(lake / "silver" / "events").to_pylist()
    assert sorted(r["event_id"] for r in silver) == sorted(e["event_id"] for e in events)
    ours = read_delta(lake / "bronze" / "our_orders").to_pylist()
    assert sorted(json.loads(r["value"])["order_id"] for r in ours) == list(range(7))
    assert {r["shop"] for r in ours} == {"ours"}
