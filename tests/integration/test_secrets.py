"""Secrets planted in every place a config holds them never appear in any command's
output: `config show`, `list`, `connectors`, `validate`, `run`, `status`, a failing run,
nor in the run's log file."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml

from eventlake.secrets import MASK
from tests.integration.cli_helpers import run_cli, write_config

pytestmark = pytest.mark.integration

PLANTED = "PLANTED"  # every secret below contains it, and nothing else printed does
ENV = {
    "VAULT_POSTGRES_PASSWORD": "PLANTED-pg-password",
    "EVENTLAKE_METRICS_TOKEN": "PLANTED-metrics-token",
    "VAULT_API_TOKEN": "PLANTED-env-token",  # under a key whose name says nothing
}
URL = "http://robot:PLANTED-url-password@127.0.0.1:9/ingest?token=PLANTED-query-token&v=1"

VAULT = """
from pyspark.sql import functions as F

from eventlake.connectors import DeltaOutput, FilesInput, HttpOutput
from eventlake.pipelines import Pipeline, PipelineParams


class VaultParams(PipelineParams):
    api_secret: str = ""
    header_value: str = ""
    sink_url: str = ""


vault = Pipeline("vault", params=VaultParams)
inbox = FilesInput("inbox", "json", "id STRING")


@vault.flow(input=inbox, output=DeltaOutput("silver", "rows"))
def copied(ctx, df):
    return df


@vault.flow(input=inbox, output=HttpOutput("sink_url", timeout=2.0))
def posted(ctx, df):
    return df
"""


def test_a_planted_secret_is_in_no_commands_output(bootstrap: str, tmp_path: Path) -> None:
    module = tmp_path / "vault.py"
    module.write_text(VAULT)
    (tmp_path / "lake" / "inbox").mkdir(parents=True)
    (tmp_path / "lake" / "inbox" / "a.json").write_text('{"id": "a"}\n{"id": "b"}\n')
    params = {"api_secret": "PLANTED-param-secret", "header_value": "${VAULT_API_TOKEN}",
              "sink_url": URL, "trigger": "1 second"}  # fmt: skip
    pg = {"password": "${VAULT_POSTGRES_PASSWORD}"}
    cfg = write_config(tmp_path / "el.yaml", bootstrap, tmp_path, postgres=pg, vault=params)
    config = yaml.safe_load(cfg.read_text())
    config["spark"]["conf"]["spark.hadoop.fs.s3a.secret.key"] = "PLANTED-s3a-secret"
    config["metrics"] = {"token": "${EVENTLAKE_METRICS_TOKEN}"}
    config["restart"] = {"finite_attempts": 0}
    cfg.write_text(yaml.safe_dump(config))

    def cli(*args: str) -> tuple[int, str]:
        done = run_cli("--config", str(cfg), *args, env=ENV)
        return done.returncode, done.stdout + done.stderr

    mod = ("--module", str(module))
    once = ("--trigger", "available-now")
    outputs: dict[str, tuple[int, str]] = {
        "config show": cli("config", "show"),
        "list": cli("list", *mod),
        "connectors": cli("connectors", *mod),
        "validate": cli("validate", "vault", *mod),
        "run": cli("run", "vault", "--flow", "copied", *once, *mod),
        "status": cli("status", "vault", *mod),
        "status json": cli("status", "vault", "--format", "json", *mod),
        "failing run": cli("run", "vault", "--flow", "posted", *once, *mod),
    }
    for command, (_, text) in outputs.items():
        assert PLANTED not in text, f"`eventlake {command}` printed a secret:\n{text}"
    # The commands did their work: the secrets were there to leak.
    assert outputs["run"][0] == 0, outputs["run"][1]
    assert outputs["failing run"][0] == 1
    assert "EL-" in outputs["failing run"][1]
    shown = yaml.safe_load(outputs["config show"][1])
    assert shown["postgres"]["password"] == MASK
    assert shown["spark"]["conf"]["spark.hadoop.fs.s3a.secret.key"] == MASK
    assert shown["pipelines"]["vault"]["api_secret"] == MASK
    assert shown["pipelines"]["vault"]["header_value"] == MASK
    assert shown["pipelines"]["vault"]["sink_url"] == (
        f"http://robot:{MASK}@127.0.0.1:9/ingest?token={MASK}&v=1"
    )
    status = json.loads(outputs["status json"][1])
    writes = {flow["flow"]: flow["writes"] for flow in status["flows"]}
    assert writes["posted"] == f"http:http://robot:{MASK}@127.0.0.1:9/ingest?token={MASK}&v=1"
    log = (tmp_path / "logs" / "eventlake.log").read_text()
    assert PLANTED not in log


def test_the_embedded_postgres_generates_its_password_when_none_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    import psycopg

    from eventlake.config import PostgresSettings
    from eventlake.postgres import EmbeddedPostgres
    from eventlake.testing import free_port

    monkeypatch.setenv("EVENTLAKE_HOME", str(tmp_path / "state"))
    pg = PostgresSettings(port=free_port())  # no password anywhere
    assert pg.resolved_password() is None
    folder = Path(tempfile.mkdtemp(prefix="eventlake-pg-generated-"))
    folder.chmod(0o755)
    server = EmbeddedPostgres(pg, folder / "data")
    try:
        server.start()
        kept = pg.generated_password_file()
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        password = kept.read_text().strip()
        assert len(password) >= 24
        assert pg.resolved_password() == password
        with psycopg.connect(**pg.connect_kwargs()) as conn:  # the clients find it
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError):  # and the server requires it
            psycopg.connect(**{**pg.connect_kwargs(), "password": "eventlake-local"})
        from eventlake.config import Settings

        assert password in Settings(postgres=pg).secret_values  # masked like a set one
    finally:
        server.remove()
