"""A connector added in one file: a new output, declared with its capabilities in a module
this test writes, runs end to end through validation, a run and `eventlake connectors`,
with no file of eventlake edited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from eventlake.errors import EventlakeError
from eventlake.pipelines.loader import load_pipelines
from eventlake.testing import run_available_now, settings_for
from tests.integration.cli_helpers import run_cli, write_config

pytestmark = pytest.mark.integration

MODULE = '''
from __future__ import annotations

import json
from dataclasses import dataclass

from eventlake.connectors import (
    BatchFunction, FilesInput, Guarantee, Output, OutputCapabilities,
)
from eventlake.pipelines import Pipeline


class Ledger:
    """A file held open for the query's life: what the output opens and the run closes."""

    def __init__(self, path):
        self.handle = open(path, "a", encoding="utf-8")

    def write(self, record):
        self.handle.write(json.dumps(record) + "\\n")
        self.handle.flush()

    def close(self):
        self.write({"closed": True})
        self.handle.close()


class _Lines(BatchFunction):
    def __init__(self, ctx, key):
        super().__init__(ctx)
        self.key = key

    def write_batch(self, df, batch_id):
        ledger = self.ctx.run.resource(self.ctx.query_name, self.key)
        for row in df.collect():
            ledger.write({"batch": batch_id, **row.asDict()})


@dataclass(frozen=True)
class LedgerOutput(Output):
    """Append every row as a JSON line to ``<lake.root>/<name>.jsonl``.

    Delivery guarantee: at-least-once (a replayed batch is appended again)."""

    name: str
    capabilities = OutputCapabilities(
        guarantee=Guarantee.AT_LEAST_ONCE, output_modes=frozenset({"append"})
    )

    def describe(self, flow=None):
        return f"ledger:{self.name}"

    def open(self, ctx):
        path = ctx.under_lake(f"{self.name}.jsonl")
        ctx.run.open_resource(ctx.query_name, self.describe(), Ledger(str(path)))

    def start_writer(self, writer, ctx, output_mode):
        return writer.foreachBatch(_Lines(ctx, self.describe())).start()


ledger = Pipeline("ledger_demo")


@ledger.flow(input=FilesInput("inbox", "json", "id STRING, amount DOUBLE"),
             output=LedgerOutput("ledger"))
def copy(ctx, df):
    return df


wrong_mode = Pipeline("ledger_wrong_mode")


@wrong_mode.flow(input=FilesInput("inbox", "json", "id STRING, amount DOUBLE"),
                 output=LedgerOutput("counts"), output_mode="complete")
def count(ctx, df):
    return df.groupBy("id").count()
'''


def test_an_output_defined_in_one_file_runs_end_to_end(spark: SparkSession, tmp_path: Path) -> None:
    module = tmp_path / "ledger_output.py"
    module.write_text(MODULE)
    inbox = tmp_path / "lake" / "inbox"
    inbox.mkdir(parents=True)
    rows = [{"id": f"o-{i}", "amount": float(i)} for i in range(12)]
    (inbox / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows[:7]))
    (inbox / "b.json").write_text("".join(json.dumps(r) + "\n" for r in rows[7:]))
    registry = load_pipelines([module])
    settings = settings_for(tmp_path)

    result = run_available_now(registry.get("ledger_demo"), settings)

    assert result.flows["ledger_demo.copy"].input_rows == 12
    lines = [json.loads(x) for x in (tmp_path / "lake" / "ledger.jsonl").read_text().splitlines()]
    assert lines[-1] == {"closed": True}  # opened when the query started, closed after
    written = sorted((r["id"], r["amount"]) for r in lines[:-1])
    assert written == sorted((r["id"], r["amount"]) for r in rows)

    # The rules read the new output's capabilities: complete mode is not among its modes.
    with pytest.raises(EventlakeError) as refused:
        run_available_now(registry.get("ledger_wrong_mode"), settings)
    assert "EL-V003" in str(refused.value)
    assert "ledger:counts" in str(refused.value)

    config = write_config(tmp_path / "eventlake.yaml", "127.0.0.1:1", tmp_path)
    args = ("--config", str(config), "connectors", "--module", str(module))
    listed = run_cli(*args, "--format", "json")
    assert listed.returncode == 0, listed.stderr
    [row] = [r for r in json.loads(listed.stdout) if r["name"] == "LedgerOutput"]
    assert row["kind"] == "output"
    assert row["module"].startswith("eventlake_user_ledger_output")
    assert row["guarantee"] == "at-least-once"
    assert row["capabilities"] == {"output modes": "append", "triggers": "micro-batch",
                                   "quarantine": "no", "late rows": "yes",
                                   "deferred creation": "no"}  # fmt: skip
    table = run_cli(*args)
    assert table.returncode == 0, table.stderr
    assert "LedgerOutput" in table.stdout
    assert "DeltaOutput" in table.stdout
