"""eventlake's own JVM classes: compiled once by the real java with pyspark's Janino into
the jar cache, found there afterwards, and a compile error reported with its code."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from eventlake import jvm_code
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.jars import JARS_DIR_ENV


def test_compiles_the_sources_once_into_the_jar_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path))
    jar = jvm_code.own_jar()
    assert jar.parent.parent == tmp_path / "eventlake"
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
    assert "eventlake/state/FirstWithinWatermark.class" in names
    assert "META-INF/MANIFEST.MF" in names
    # eventlake.fs goes on the driver's class path, in a jar of its own beside it.
    with zipfile.ZipFile(jvm_code.fs_jar(jar)) as z:
        fs = set(z.namelist())
    assert "eventlake/fs/InProcessLocalFileSystem$Raw.class" in fs
    assert not [n for n in fs if n.endswith(".class") and not n.startswith("eventlake/fs/")]
    assert not [n for n in names if n.startswith("eventlake/fs/")]
    made = jar.stat().st_mtime_ns
    assert jvm_code.own_jar() == jar
    assert jar.stat().st_mtime_ns == made
    assert jvm_code.spark_jars()[-1] == jar


def test_other_sources_compile_to_another_jar_and_errors_carry_a_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path))
    shipped = jvm_code.own_jar_path()
    broken = {"Broken.java": b"package eventlake; public class Broken { int x = ; }"}
    monkeypatch.setattr(jvm_code, "_sources", lambda: broken)
    assert jvm_code.own_jar_path() != shipped
    with pytest.raises(EventlakeError) as caught:
        jvm_code.own_jar()
    assert caught.value.code == ErrorCode.JVM_CODE_FAILED
    assert "Broken.java" in str(caught.value)
    assert not jvm_code.own_jar_path().exists()
