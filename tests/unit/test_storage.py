"""Locations (local paths and URIs) and the local storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlake.config.loader import settings_from_dict
from eventlake.storage import Location, filesystem
from eventlake.storage.local import LocalStorage


def test_a_uri_keeps_its_scheme_and_authority() -> None:
    root = Location("hdfs://nn.example:8020/data/lake/")
    assert str(root) == "hdfs://nn.example:8020/data/lake"
    assert (root / "bronze" / "orders").name == "orders"
    assert (
        str(root.joinpath("bronze", "orders")) == "hdfs://nn.example:8020/data/lake/bronze/orders"
    )
    assert str((root / "bronze").parent) == "hdfs://nn.example:8020/data/lake"
    assert root.scheme == "hdfs"
    assert not root.is_local
    assert Location("s3a://bucket/lake").scheme == "s3a"
    with pytest.raises(ValueError, match="not a local path"):
        _ = root.path


def test_local_paths_are_absolute_and_file_uris_are_local(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Location("rel/lake").path == tmp_path / "rel" / "lake"
    assert Location(f"file://{tmp_path}/x").path == tmp_path / "x"
    assert Location(f"file:{tmp_path}/y").is_local
    assert Location(tmp_path) == Location(str(tmp_path))


def test_settings_take_uris_for_the_lake_and_checkpoints(tmp_path: Path) -> None:
    settings = settings_from_dict({
        "lake": {"root": "hdfs://nn:8020/lake"},
        "checkpoints": {"root": "s3a://bucket/cp"},
    })  # fmt: skip
    assert str(settings.lake.table_path("gold", "t")) == "hdfs://nn:8020/lake/gold/t"
    assert str(settings.checkpoints.for_flow("p", "f")) == "s3a://bucket/cp/p/f"
    # The log stays on this machine, in the state folder.
    assert settings.log_file().name == "eventlake.log"
    assert "s3a:" not in str(settings.log_file())
    assert settings.model_dump(mode="json")["lake"]["root"] == "hdfs://nn:8020/lake"


def test_local_storage_round_trip(tmp_path: Path) -> None:
    fs = filesystem(Location(tmp_path))
    assert isinstance(fs, LocalStorage)
    folder = Location(tmp_path) / "cp"
    assert fs.list_names(folder) == []
    assert not fs.exists(folder)
    fs.write_text(folder / "offsets" / "0", "v1\n{}")
    fs.write_text(folder / "offsets" / "0", 'v1\n{"x": 1}')
    assert fs.read_text(folder / "offsets" / "0") == 'v1\n{"x": 1}'
    assert fs.list_names(folder / "offsets") == ["0"]  # no temporary file left behind
    assert fs.is_dir(folder)
    assert fs.is_file(folder / "offsets" / "0")
    assert fs.size(folder) == len('v1\n{"x": 1}')
    assert fs.modified(folder / "offsets" / "0") is not None
    assert fs.modified(folder / "none") is None
    fs.copy_to_local(folder / "offsets", tmp_path / "copy" / "offsets")
    assert (tmp_path / "copy" / "offsets" / "0").read_text() == 'v1\n{"x": 1}'
    fs.delete(folder)
    assert not fs.exists(folder)
    fs.delete(folder)  # absent: nothing to do
