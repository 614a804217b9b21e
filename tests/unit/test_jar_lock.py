"""The jar lock shipped in the package is what Maven resolves from jvm/*/pom.xml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eventlake.jars import locked
from scripts.lock_jars import LOCK, SETS, resolve

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("name", SETS)
def test_the_lock_matches_what_maven_resolves(name: str) -> None:
    resolved = resolve(ROOT / "jvm" / name / "pom.xml")
    assert resolved, name
    shipped = json.loads(LOCK.read_text())["sets"][name]["jars"]
    assert shipped == resolved, f"run `make lock-jars`: jvm/{name}/pom.xml changed"
    assert [j.coordinates for j in locked(name)] == [
        ":".join([j["group"], j["artifact"], j["version"]]) for j in resolved
    ]


def test_every_pom_is_locked() -> None:
    poms = {p.parent.name for p in (ROOT / "jvm").glob("*/pom.xml")}
    assert poms - set(SETS) == {"iceberg-probe"}  # a probe of versions, not a shipped set
