"""ToPostgres on a real server: a connection of Spark's JDBC writer lost in the middle of a
batch restarts the flow as EL-POSTGRES-003 (transient), any other error of the writer as
EL-SINK-001 naming the server's answer; either way the retried batch lands once."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from eventlake.config import PostgresSettings, RestartSettings
from eventlake.testing import running_pipeline, settings_for, unique_name, wait_until
from tests.integration.postgres_pipeline import postgres_pipeline

pytestmark = pytest.mark.integration

# On the first CREATE TABLE from Spark's JDBC writer (the batch's staging table, created by
# the driver), the server runs {action}.
_FAIL_FIRST_JDBC_CREATE = """
CREATE SEQUENCE jdbc_creates;
CREATE FUNCTION fail_first_jdbc_create() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('application_name') = 'PostgreSQL JDBC Driver' THEN
    IF nextval('jdbc_creates') = 1 THEN
      {action};
    END IF;
  END IF;
END $$;
CREATE EVENT TRIGGER fail_first_jdbc_create ON ddl_command_start WHEN TAG IN ('CREATE TABLE')
  EXECUTE FUNCTION fail_first_jdbc_create();
"""
# Ends the session as an administrator's pg_terminate_backend does (FATAL, SQLSTATE 57P01).
_TERMINATE = "PERFORM pg_terminate_backend(pg_backend_pid())"
_REFUSE = "RAISE EXCEPTION 'staging refused by the test'"  # SQLSTATE P0001


def _database(server: PostgresSettings) -> PostgresSettings:
    """A database of its own on the session's server, so its event trigger fires for no
    other test."""
    name = unique_name("jdbc_loss").lower()
    with psycopg.connect(**server.connect_kwargs(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.model_copy(update={"database": name})


def _rows(pg: PostgresSettings) -> list[tuple[str, float]] | None:
    try:
        with psycopg.connect(**pg.connect_kwargs(), connect_timeout=2) as conn:
            return conn.execute("SELECT id, amount FROM rows ORDER BY id").fetchall()
    except psycopg.errors.UndefinedTable:
        return None


@pytest.mark.parametrize(
    ("action", "code", "says"),
    [
        (_TERMINATE, "EL-POSTGRES-003", "lost the connection to PostgreSQL at {server} while "
         "Spark's JDBC writer staged the batch: FATAL: terminating connection due to "
         "administrator command"),
        (_REFUSE, "EL-SINK-001", "target 'postgres:rows' of flow 'jdbc_loss_demo.to_postgres' "
         "failed on batch 0: org.postgresql.util.PSQLException: ERROR: staging refused by the "
         "test"),
    ],
    ids=["connection-lost", "statement-failed"],
)  # fmt: skip
def test_a_failed_jdbc_staging_restarts_with_its_code_and_the_retry_lands_once(
    tmp_path: Path, postgres: PostgresSettings, action: str, code: str, says: str
) -> None:
    pg = _database(postgres)
    with psycopg.connect(**pg.connect_kwargs(), autocommit=True) as conn:
        conn.execute(_FAIL_FIRST_JDBC_CREATE.replace("{action}", action))
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    sent = [(f"r-{i:02d}", float(i)) for i in range(20)]
    (inbox / "a.json").write_text(
        "".join(json.dumps({"id": key, "amount": amount}) + "\n" for key, amount in sent)
    )
    backoff = RestartSettings(initial_delay="1 second", max_delay="2 seconds")
    settings = settings_for(tmp_path).model_copy(update={"postgres": pg, "restart": backoff})

    pipeline = postgres_pipeline("jdbc_loss_demo", delta=False)
    with running_pipeline(pipeline, settings, trigger="1 second") as run:
        wait_until(lambda: _rows(pg) == sent, timeout=120,
                   what="every row in PostgreSQL after the restart")  # fmt: skip
        restart = {f["flow"]: f for f in run.status()["flows"]}["to_postgres"]["last_restart"]

    with psycopg.connect(**pg.connect_kwargs()) as conn:
        fired = conn.execute("SELECT last_value FROM jdbc_creates").fetchone()
        commits = conn.execute(
            "SELECT batch_id, count(*) FROM eventlake_commits GROUP BY batch_id"
        ).fetchall()
        staged = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'eventlake_stage_%'"
        ).fetchone()
    assert fired == (2,)  # the failed CREATE, then the retry's
    assert restart is not None
    assert restart["code"] == code
    assert restart["restarts"] == 1
    assert restart["error"] == says.format(server=f"{pg.host}:{pg.port} as {pg.user}")
    assert commits == [(0, 1)]
    assert staged == (0,)
    assert run.result is not None
    assert run.result.restarts["jdbc_loss_demo.to_postgres"] == 1
