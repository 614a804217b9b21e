"""A failed flow restarts from its checkpoint after its strategy's delay while the other
flows keep running; a fatal error stops the run at once, naming its code."""

from __future__ import annotations

import json
import secrets
import tempfile
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import DataFrame

from eventlake.checkpoints import CheckpointLog
from eventlake.config import PostgresSettings, RestartSettings
from eventlake.connectors import DeltaOutput, FilesInput
from eventlake.pipelines import Pipeline
from eventlake.postgres import EmbeddedPostgres
from eventlake.testing import free_port, read_delta, running_pipeline, settings_for, wait_until
from tests.integration.postgres_pipeline import SCHEMA, postgres_pipeline

pytestmark = pytest.mark.integration


def _restarts(samples: dict[str, list[Any]], flow: str) -> dict[str, float]:
    return {
        s.labels["reason"]: s.value
        for s in samples.get("eventlake_flow_restarts", [])
        if s.name.endswith("_total") and s.labels["flow"] == flow
    }


def _probe(url: str) -> tuple[int, str]:
    """(status, body) of a GET on the run's endpoint."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _pg_rows(settings: PostgresSettings) -> int | None:
    try:
        with psycopg.connect(**settings.connect_kwargs(), connect_timeout=2) as conn:
            row = conn.execute("SELECT count(*) FROM rows").fetchone()
    except (psycopg.OperationalError, psycopg.errors.UndefinedTable):
        return None
    return int(row[0]) if row else None


def test_a_flow_restarts_while_postgresql_is_down_and_the_others_keep_running(
    tmp_path: Path,
) -> None:
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    rows = [{"id": f"r-{i}", "amount": float(i)} for i in range(20)]
    (inbox / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    folder = Path(tempfile.mkdtemp(prefix="eventlake-pg-restart-"))
    folder.chmod(0o755)
    pg = PostgresSettings(port=free_port(), password=secrets.token_urlsafe(12))
    server = EmbeddedPostgres(pg, folder / "data")  # not started: the flow's target is down
    backoff = RestartSettings(initial_delay="1 second", multiplier=1.5, max_delay="3 seconds")
    settings = settings_for(tmp_path).model_copy(update={"postgres": pg, "restart": backoff})
    try:
        pipeline = postgres_pipeline("restart_demo", delta=True)
        with running_pipeline(pipeline, settings, trigger="1 second") as run:
            wait_until(
                lambda: sum(_restarts(run.metrics(), "to_postgres").values()) >= 2,
                timeout=120, what="the PostgreSQL flow to fail and restart twice",
            )  # fmt: skip
            # The other flow of the pipeline went on meanwhile.
            wait_until(lambda: len(read_delta(tmp_path / "lake" / "silver" / "rows")) == 20,
                       timeout=120, what="the Delta flow to write every row")  # fmt: skip
            assert _pg_rows(pg) is None
            # Kubernetes' probes: alive, but not ready while a flow waits to restart.
            assert _probe(run.url + "healthz") == (200, "ok\n")
            status, body = _probe(run.url + "readyz")
            assert status == 503
            assert set(json.loads(body)["flows"]) == {"restart_demo.to_postgres"}
            # `eventlake status` (the run's /api/status) shows it restarting, with its error.
            flows = {f["flow"]: f for f in run.status()["flows"]}
            assert flows["to_postgres"]["restarting"] is True
            assert flows["to_postgres"]["last_restart"]["code"] == "EL-POSTGRES-003"
            assert flows["to_delta"]["restarting"] is False
            assert flows["to_delta"]["last_restart"] is None
            server.start()
            wait_until(lambda: _pg_rows(pg) == 20, timeout=120,
                       what="the restarted flow to write every row to PostgreSQL")  # fmt: skip
            wait_until(lambda: _probe(run.url + "readyz")[0] == 200, timeout=60,
                       what="the run to be ready once every flow runs again")  # fmt: skip
            reasons = _restarts(run.metrics(), "to_postgres")
            assert set(reasons) == {"EL-POSTGRES-003"}
            assert _restarts(run.metrics(), "to_delta") == {}
    finally:
        server.remove()
    assert run.result is not None
    assert run.result.restarts["restart_demo.to_postgres"] >= 2
    assert "restart_demo.to_delta" not in run.result.restarts
    assert run.result.flows["restart_demo.to_delta"].input_rows == 20


def test_a_fatal_error_stops_the_run_at_once_even_with_unlimited_restarts(
    tmp_path: Path,
) -> None:
    from eventlake.errors import EventlakeError
    from eventlake.pipelines import expect

    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "a.json").write_text('{"id": "ok", "amount": 1.0}\n{"id": "bad", "amount": -1.0}\n')
    p = Pipeline("fatal_demo")

    @p.flow(input=FilesInput("inbox", "json", SCHEMA), output=DeltaOutput("silver", "rows"))
    @expect("positive_amount", "amount > 0", on_violation="fail")
    def checked(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    @p.flow(input=FilesInput("inbox", "json", SCHEMA), output=DeltaOutput("silver", "all"))
    def unchecked(ctx: Any, df: DataFrame) -> DataFrame:
        return df

    settings = settings_for(tmp_path)
    assert settings.restart.strategy == "exponential-delay"
    assert settings.restart.attempts is None  # unlimited, by default
    with pytest.raises(EventlakeError) as caught:  # noqa: SIM117 - the run ends by itself
        with running_pipeline(p, settings, trigger="1 second") as run:
            wait_until(lambda: run.error is not None, timeout=120,
                       what="the run to stop on the failed expectation")  # fmt: skip
    assert caught.value.code == "EL-EXPECT-001"
    assert "restarts)" not in caught.value.what
    assert len(read_delta(tmp_path / "lake" / "silver" / "rows")) == 0
    # The other flow was stopped between batches, not cut inside one.
    other = CheckpointLog(tmp_path / "checkpoints" / "fatal_demo" / "unchecked")
    assert other.in_flight is None


def test_kafka_client_properties_the_client_refuses_stop_the_run_with_their_code(
    tmp_path: Path, bootstrap: str, make_topic: Any
) -> None:
    """A Java client property Kafka refuses (``kafka.java_properties``) is EL-KAFKA-008,
    fatal: no restart can fix it."""
    from eventlake.connectors import KafkaInput, kafka_records
    from eventlake.errors import EventlakeError

    topic = make_topic(partitions=1, prefix="refused")
    p = Pipeline("refused_demo")

    @p.flow(input=KafkaInput(), output=DeltaOutput("bronze", "refused"))
    def raw(ctx: Any, df: DataFrame) -> DataFrame:
        return kafka_records(df)

    settings = settings_for(tmp_path, bootstrap, refused_demo={"topic": topic})
    # Kafka requires request.timeout.ms (30 s by default) <= default.api.timeout.ms.
    wrong = {"default.api.timeout.ms": 1000}
    settings = settings.model_copy(
        update={"kafka": settings.kafka.model_copy(update={"java_properties": wrong})}
    )
    with pytest.raises(EventlakeError) as caught:  # noqa: SIM117 - the run ends by itself
        with running_pipeline(p, settings, trigger="1 second") as run:
            wait_until(lambda: run.error is not None, timeout=120,
                       what="the run to stop on the refused property")  # fmt: skip
    assert caught.value.code == "EL-KAFKA-008"
    assert "default.api.timeout.ms" in caught.value.what
    assert "restarts)" not in caught.value.what


def test_a_task_that_fails_once_is_tried_again_inside_its_query(tmp_path: Path) -> None:
    """Under a local master a task gets four tries, as on a cluster: a transient task
    failure costs the task, not a restart of the flow."""
    from pyspark.sql import functions as F

    from eventlake.testing import run_available_now

    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    rows = [{"id": f"r-{i}", "amount": float(i)} for i in range(20)]
    (inbox / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    failed = tmp_path / "failed-once"

    def flaky(value: str) -> str:
        if not failed.exists():
            failed.write_text("the first try of this task failed")
            raise RuntimeError("a transient task failure")
        return value

    p = Pipeline("retry_demo")

    @p.flow(input=FilesInput("inbox", "json", SCHEMA), output=DeltaOutput("silver", "rows"))
    def copied(ctx: Any, df: DataFrame) -> DataFrame:
        return df.select(F.udf(flaky, "string", useArrow=False)("id").alias("id"), "amount")

    result = run_available_now(p, settings_for(tmp_path))
    assert failed.exists()  # a task did fail
    assert result.restarts == {}  # and its query did not
    written = read_delta(tmp_path / "lake" / "silver" / "rows").to_pylist()
    assert sorted(r["id"] for r in written) == sorted(r["id"] for r in rows)
