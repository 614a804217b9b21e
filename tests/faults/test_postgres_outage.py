"""Faults on real components: the users fan-out's PostgreSQL (MERGE + PostgreSQL + Kafka
targets in one batch) is stopped under the running pipeline for 30 s, or until the silver
flow has failed and restarted if that takes longer, then started again. The silver flow
fails with EL-POSTGRES-003 and restarts on its own; bronze keeps running.
Afterwards every target equals the independent computation: the Delta tables and
PostgreSQL exactly, the at-least-once state topic holds every changed user. The recovery
time, from the server's restart to every target caught up, is printed."""

from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eventlake.config import PostgresSettings, RestartSettings
from eventlake.generator import CdcConfig, CdcGenerator, GeneratedRecord, send
from eventlake.postgres import EmbeddedPostgres
from eventlake.testing import free_port, running_pipeline, unique_name, wait_until
from tests.integration.test_users_chaos import state_keys
from tests.integration.test_users_pipeline import pg_users, scd1, scd2, users_settings
from tests.integration.users_expected import expected_history, expected_users

pytestmark = pytest.mark.integration

OUTAGE = 30.0
# A slow machine's silver batch can take a minute before it reaches the stopped server.
FAILURE_SEEN = 240.0


def _caught_up(
    root: Path, pg: PostgresSettings, table: str, records: list[GeneratedRecord]
) -> Callable[[], bool]:
    want = expected_users(records)

    def check() -> bool:
        try:
            return pg_users(pg, table) == want and scd1(root) == want
        except Exception:  # the server is still starting, or a table not yet written
            return False

    return check


def test_postgresql_stopped_30s_under_the_users_fanout(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    topic, state = make_topic(partitions=3, prefix="cdc-pg"), make_topic(prefix="state-pg")
    table = unique_name("users_pg").replace("-", "_")
    folder = Path(tempfile.mkdtemp(prefix="eventlake-pg-outage-"))
    folder.chmod(0o755)
    pg = PostgresSettings(port=free_port(), password=secrets.token_urlsafe(12))
    server = EmbeddedPostgres(pg, folder / "data")
    server.start()
    settings = users_settings(bootstrap, tmp_path, topic, pg, postgres_table=table,
                              state_topic=state, max_offsets_per_trigger=200)  # fmt: skip
    settings = settings.model_copy(update={"restart": RestartSettings(max_delay="10 seconds")})
    gen = CdcGenerator(CdcConfig(seed=31, users=40, out_of_order_fraction=0.15,
                                 duplicate_fraction=0.08, malformed_fraction=0.02))  # fmt: skip
    records = gen.records(1500)
    before = [next(records) for _ in range(600)]
    during = [next(records) for _ in range(500)]
    after = list(records)
    try:
        with running_pipeline("users", settings, trigger="1 second") as run:
            send(bootstrap, topic, before)
            wait_until(_caught_up(tmp_path, pg, table, before), timeout=180,
                       what="the first changes in every target")  # fmt: skip
            server.stop()
            down = time.monotonic()
            send(bootstrap, topic, during)
            wait_until(lambda: _silver_restarted(run.status()), timeout=FAILURE_SEEN,
                       what="the silver flow to fail and restart")  # fmt: skip
            time.sleep(max(0.0, OUTAGE - (time.monotonic() - down)))  # the rest of the outage
            away = time.monotonic() - down
            server.start()
            back = time.monotonic()
            send(bootstrap, topic, after)
            everything = before + during + after
            wait_until(_caught_up(tmp_path, pg, table, everything), timeout=300,
                       what="every target caught up after PostgreSQL came back")  # fmt: skip
            recovery = time.monotonic() - back
            status = {f["flow"]: f for f in run.status()["flows"]}
        assert run.result is not None
        restarts = run.result.restarts
        assert restarts.get("users.silver", 0) >= 1
        assert "users.bronze" not in restarts  # the other flow kept running
        assert status["silver"]["last_restart"]["code"] == "EL-POSTGRES-003"
        # Exactly once in Delta and PostgreSQL: the tables equal the independent result.
        assert pg_users(pg, table) == expected_users(everything)
        assert scd1(tmp_path) == expected_users(everything)
        assert scd2(tmp_path) == expected_history(everything)
        # The Kafka target is at-least-once: every user whose state changed is there.
        assert {int(k) for k in expected_users(everything)} <= state_keys(bootstrap, state)
    finally:
        server.remove()
    with capsys.disabled():
        print(f"\n[fault] PostgreSQL away {away:.0f} s under the users fan-out: every target "
              f"caught up {recovery:.1f} s after it came back, "
              f"{restarts['users.silver']} restart(s) of users.silver")  # fmt: skip


def _silver_restarted(status: dict[str, Any]) -> bool:
    flows = {f["flow"]: f for f in status["flows"]}
    return flows["silver"]["last_restart"] is not None
