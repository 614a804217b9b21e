"""Finding PostgreSQL's server programs: EVENTLAKE_PG_BIN, pg_config, PATH, then the
distributions' folders."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.postgres.server import bin_dir_candidates, find_bin_dir

PROGRAMS = ("initdb", "pg_ctl", "postgres")


def test_pg_config_names_the_installed_server() -> None:
    pg_config = shutil.which("pg_config")
    assert pg_config is not None  # make postgres installs it with the server
    bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                            check=True).stdout.strip()  # fmt: skip
    assert find_bin_dir() == Path(bindir)


def test_a_server_on_path_is_found_before_the_distribution_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "pgsql" / "bin"
    own.mkdir(parents=True)
    for name in PROGRAMS:  # a server of its own install: a copy, not Debian's folder
        shutil.copy2(Path(find_bin_dir()) / name, own / name)
    monkeypatch.setenv("PATH", str(own))  # no pg_config there
    monkeypatch.delenv("EVENTLAKE_PG_BIN", raising=False)
    assert find_bin_dir() == own
    assert bin_dir_candidates()[0] == own


def test_eventlake_pg_bin_wins_and_a_wrong_one_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTLAKE_PG_BIN", str(tmp_path))
    assert bin_dir_candidates()[0] == tmp_path
    assert find_bin_dir() != tmp_path  # empty: the next candidate that holds a server
    monkeypatch.setenv("PATH", str(tmp_path))  # neither pg_config nor pg_ctl
    monkeypatch.setattr("eventlake.postgres.server.DISTRIBUTION_GLOBS", ())
    with pytest.raises(EventlakeError) as caught:
        find_bin_dir()
    assert caught.value.code is ErrorCode.POSTGRES_MISSING
    assert f"EVENTLAKE_PG_BIN={tmp_path}" in str(caught.value)
