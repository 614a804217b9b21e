"""The suite's own scheduling: under ``make test`` (``--dist loadgroup``) the tests of a heavy
fixture run on one worker, so the fixture starts once (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]

CONFTEST = """
import pytest

from tests.conftest import pytest_collection_modifyitems  # noqa: F401


@pytest.fixture(scope="session")
def {heavy}():
    return "started"
"""

TESTS = """
def test_heavy_1({heavy}): pass
def test_heavy_2({heavy}): pass
def test_heavy_3({heavy}): pass
def test_heavy_4({heavy}): pass
def test_light_1(): pass
def test_light_2(): pass
def test_light_3(): pass
def test_light_4(): pass
"""


def test_the_tests_of_a_heavy_fixture_run_on_one_worker(tmp_path: Path) -> None:
    from tests.conftest import HEAVY_FIXTURES

    heavy = HEAVY_FIXTURES[0]
    (tmp_path / "conftest.py").write_text(CONFTEST.format(heavy=heavy))
    (tmp_path / "test_grouped.py").write_text(TESTS.format(heavy=heavy))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
         "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran = re.findall(r"\[(gw\d)\] .*PASSED \S*::(test_\w+)(@\w+)?", done.stdout)
    assert len(ran) == 8, done.stdout
    workers = {worker for worker, name, _group in ran if name.startswith("test_heavy")}
    groups = {group for _worker, name, group in ran if name.startswith("test_heavy")}
    assert groups == {f"@{heavy}"}, done.stdout
    assert len(workers) == 1, done.stdout
    assert all(not group for _worker, name, group in ran if name.startswith("test_light"))
