"""`eventlake demo` (what `make demo` runs) as a user runs it, on its own broker and
PostgreSQL, checked from its tables with delta-rs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eventlake.testing import free_port, read_delta
from tests.integration.cli_helpers import run_cli, write_config
from tests.integration.orders_expected import as_set

pytestmark = pytest.mark.integration

SECONDS, RATE = 10, 50


def test_demo_runs_every_pipeline_and_loses_nothing(tmp_path: Path) -> None:
    # The demo puts its lake and checkpoints under EVENTLAKE_HOME, whatever the config says.
    write_config(
        tmp_path / "eventlake.yaml", f"localhost:{free_port()}", tmp_path,
        postgres={"port": free_port()},
    )  # fmt: skip
    home = tmp_path / ".eventlake"

    done = run_cli(
        "demo", "--seconds", str(SECONDS), "--rate", str(RATE),
        cwd=tmp_path, env={"EVENTLAKE_HOME": str(home), "COLUMNS": "200"},
    )  # fmt: skip

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    lake = home / "demo" / "lake"

    bronze = read_delta(lake / "bronze/orders").to_pandas()
    silver = read_delta(lake / "silver/orders").to_pandas()
    quarantine = read_delta(lake / "silver/orders_quarantine").to_pandas()
    assert len(bronze) == SECONDS * RATE
    assert not bronze.duplicated(["partition", "offset"]).any()
    assert silver.order_id.is_unique
    keys = {
        name: set(zip(df.partition, df.offset, strict=True))
        for name, df in (("bronze", bronze), ("silver", silver), ("quarantine", quarantine))
    }
    assert keys["silver"] <= keys["bronze"]
    assert keys["quarantine"] <= keys["bronze"]
    assert not keys["silver"] & keys["quarantine"]
    kept = keys["silver"] | keys["quarantine"]
    left = bronze[
        [(p, o) not in kept for p, o in zip(bronze.partition, bronze.offset, strict=True)]
    ]
    silver_ids = set(silver.order_id)
    not_duplicates = sum(json.loads(v)["order_id"] not in silver_ids for v in left.value)
    late = re.search(r"nothing lost: .*\+ late dropped (\d+)", done.stdout)
    assert late, done.stdout[-3000:]
    assert not_duplicates == int(late.group(1))

    users = read_delta(lake / "silver/users").to_pandas()
    history = read_delta(lake / "silver/users_history").to_pandas()
    assert len(users) > 0
    assert users.user_id.is_unique
    current = history[history.is_current]
    columns = ["user_id", "email", "tier"]
    assert as_set(users, columns) == as_set(current, columns)
    assert "PostgreSQL matches silver/users" in done.stdout

    sessions = read_delta(lake / "gold/user_sessions").to_pandas()
    custom = read_delta(lake / "gold/user_sessions_custom").to_pandas()
    columns = ["user_id", "session_start", "session_end", "events"]
    assert len(sessions) > 0
    assert as_set(sessions, columns) == as_set(custom, columns)
