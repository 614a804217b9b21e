"""A project: `eventlake init`, pipelines named in eventlake.yaml, examples opted into."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from eventlake.cli.init import scaffold
from eventlake.cli.main import app
from eventlake.config import Settings, load_settings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.loader import project_pipelines

EXAMPLES = {"orders", "users", "clickstream", "ads", "sensors", "alerts"}
MINE = """
from eventlake.connectors import DeltaOutput, KafkaInput, kafka_records
from eventlake.pipelines import Pipeline

orders = Pipeline("orders", description="my own orders")


@orders.flow(input=KafkaInput(), output=DeltaOutput("bronze", "my_orders"))
def raw(ctx, df):
    return kafka_records(df)
"""


def test_init_writes_a_project_and_never_overwrites_one(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["init", str(tmp_path / "proj")])
    assert done.exit_code == 0, done.output
    project = tmp_path / "proj"
    written = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    assert written == [".gitignore", "README.md", "eventlake.yaml", "pipelines/events.py",
                       "tests/conftest.py", "tests/test_events.py"]  # fmt: skip
    settings = load_settings(project / "eventlake.yaml")
    assert settings.project_modules() == [project / "pipelines" / "events.py"]
    assert project_pipelines(settings).names() == ["events"]

    (project / "pipelines" / "events.py").write_text("# mine now\n")
    with pytest.raises(EventlakeError) as caught:
        scaffold(project)
    assert caught.value.code is ErrorCode.PROJECT_EXISTS
    assert "pipelines/events.py" in str(caught.value)
    assert (project / "pipelines" / "events.py").read_text() == "# mine now\n"


def test_examples_are_opt_in_and_a_project_pipeline_keeps_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proj" / "pipelines").mkdir(parents=True)
    (tmp_path / "proj" / "pipelines" / "orders.py").write_text(MINE)
    config = tmp_path / "proj" / "eventlake.yaml"
    config.write_text("project:\n  modules: [pipelines/*.py]\n")
    monkeypatch.chdir(tmp_path)  # globs are relative to the config file, not the cwd

    assert not EXAMPLES & set(project_pipelines(Settings()).names())
    mine = project_pipelines(load_settings(config))
    assert mine.names() == ["orders"]
    assert mine.get("orders").description == "my own orders"

    both = project_pipelines(load_settings(config, ["project.examples=true"]))
    assert set(both.names()) == EXAMPLES
    assert both.get("orders").description == "my own orders"  # the project's wins
    assert "bronze" not in both.get("orders").flows


def test_an_example_pipeline_without_the_opt_in_says_how(tmp_path: Path) -> None:
    config = tmp_path / "eventlake.yaml"
    config.write_text("pipelines:\n  orders:\n    topic: orders\n")
    done = CliRunner().invoke(app, ["--config", str(config), "list"])
    assert done.exit_code != 0
    assert isinstance(done.exception, EventlakeError)
    assert done.exception.code is ErrorCode.CONFIG_UNKNOWN_KEY
    assert "project.examples: true" in done.exception.render()
    mine = CliRunner().invoke(app, ["--config", str(config), "--set", "pipelines.mine.topic=t",
                                    "list"])  # fmt: skip
    assert isinstance(mine.exception, EventlakeError)
    assert "project.modules" in mine.exception.render()
    with pytest.raises(EventlakeError) as caught:
        project_pipelines(Settings()).get("users")
    assert "project.examples: true" in caught.value.render()
