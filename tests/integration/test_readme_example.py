"""README's "Writing a pipeline" example runs as written, through the commands it shows."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from eventlake.kafka import produce
from eventlake.testing import read_delta
from tests.integration.cli_helpers import run_cli, write_config

pytestmark = pytest.mark.integration

README = Path(__file__).parents[2] / "README.md"


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_writing_a_pipeline_example_runs(
    bootstrap: str, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    part = section("Writing a pipeline")
    code = re.search(r"```python\n(.*?)```", part, re.S)
    commands = re.search(r"```bash\n(.*?)```", part, re.S)
    assert code is not None
    assert commands is not None
    module = tmp_path / "clicks.py"
    module.write_text(code.group(1))
    topic = make_topic(partitions=2, prefix="clicks")
    pages = ["/home", "/cart", "/home", "/pay", "/home"]
    produce(bootstrap, topic, ((str(i), json.dumps({"page": p})) for i, p in enumerate(pages)))
    cfg = write_config(tmp_path / "eventlake.yaml", bootstrap, tmp_path, clicks={"topic": topic})

    lines = [line.split() for line in commands.group(1).strip().splitlines()]
    assert [line[:2] for line in lines] == [
        ["eventlake", "list"], ["eventlake", "validate"], ["eventlake", "run"],
    ]  # fmt: skip
    outputs, progress = [], []
    for words in lines:
        args = [str(module) if w == "clicks.py" else w for w in words[1:]]
        done = run_cli("--config", str(cfg), *args, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        outputs.append(done.stdout)
        progress.append(done.stderr)

    listed = outputs[0]
    assert "clicks.raw" in listed
    assert "clicks.per_page" in listed
    assert f"kafka:{topic} -> delta:bronze/clicks" in listed
    assert "exactly-once" in listed
    assert "is valid" in outputs[1]
    assert f"[clicks.raw] batch 0: {len(pages)} rows" in progress[2]
    assert (tmp_path / "checkpoints" / "clicks" / "raw" / "commits").is_dir()

    bronze = read_delta(tmp_path / "lake" / "bronze" / "clicks")
    assert sorted(json.loads(v)["page"] for v in bronze.column("value").to_pylist()) == sorted(
        pages
    )
    # The window flow ran and its table exists; no window is closed yet (the watermark
    # needs later events), so it holds no row.
    gold = read_delta(tmp_path / "lake" / "gold" / "clicks_5min")
    assert gold.column_names == ["start", "end", "page", "count"]
    assert gold.num_rows == 0
