"""Jars downloaded on first use: from a mirror that wants a login, checked against the lock."""

from __future__ import annotations

import base64
import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.jars import HDFS_TEST_JARS, cache_dir, jar_files, locked, missing

LOGIN = "builder:s3cret-mirror"
BASIC = "Basic " + base64.b64encode(LOGIN.encode()).decode()


class _Mirror(SimpleHTTPRequestHandler):
    requests: list[str]

    def do_GET(self) -> None:
        self.requests.append(self.path)
        if self.headers.get("Authorization") != BASIC:
            self.send_error(401)
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[Path, str, list[str]]]:
    """A Maven repository over HTTP on loopback that wants a login: (its folder, URL, paths
    asked for)."""
    root = tmp_path / "mirror"
    root.mkdir()
    requests: list[str] = []
    handler = type("Mirror", (_Mirror,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://{LOGIN}@127.0.0.1:{server.server_address[1]}/maven2", requests
    finally:
        server.shutdown()


def _publish(root: Path, jar_path: str, source: Path) -> None:
    target = root / "maven2" / jar_path
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)


def test_first_use_downloads_the_set_from_a_mirror_and_then_uses_the_cache(
    mirror: tuple[Path, str, list[str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    [jar] = locked(HDFS_TEST_JARS)
    original = jar_files(HDFS_TEST_JARS)[0]  # the developer's own cache, filled by make
    root, url, requests = mirror
    _publish(root, jar.relative_path, original)
    monkeypatch.setenv("EVENTLAKE_JARS_DIR", str(tmp_path / "cache"))
    assert missing([HDFS_TEST_JARS]) == [jar]

    [path] = jar_files(HDFS_TEST_JARS, repository=url)
    assert path == cache_dir() / jar.relative_path
    assert path.read_bytes() == original.read_bytes()
    assert requests == [f"/maven2/{jar.relative_path}"]
    said = capfd.readouterr().err
    assert "downloading 1 hdfs-test jars" in said
    assert "s3cret-mirror" not in said  # the login is masked
    assert jar_files(HDFS_TEST_JARS, repository=url) == [path]
    assert len(requests) == 1  # cached: not asked again


def test_a_jar_that_does_not_match_the_lock_is_refused_and_not_kept(
    mirror: tuple[Path, str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [jar] = locked(HDFS_TEST_JARS)
    root, url, _ = mirror
    tampered = tmp_path / "tampered.jar"
    tampered.write_bytes(b"PK not the jar Maven Central serves")
    _publish(root, jar.relative_path, tampered)
    monkeypatch.setenv("EVENTLAKE_JARS_DIR", str(tmp_path / "cache"))

    with pytest.raises(EventlakeError) as caught:
        jar_files(HDFS_TEST_JARS, repository=url)
    assert caught.value.code is ErrorCode.JARS_FETCH_FAILED
    assert jar.sha256 in str(caught.value)
    assert "s3cret-mirror" not in caught.value.render()
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_a_mirror_that_refuses_the_login_says_so(
    mirror: tuple[Path, str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url, requests = mirror
    monkeypatch.setenv("EVENTLAKE_JARS_DIR", str(tmp_path / "cache"))
    wrong = url.replace("s3cret-mirror", "wrong")
    with pytest.raises(EventlakeError) as caught:
        jar_files(HDFS_TEST_JARS, repository=wrong)
    assert caught.value.code is ErrorCode.JARS_FETCH_FAILED
    assert "401" in str(caught.value)
    assert "EVENTLAKE_MAVEN_REPOSITORY" in caught.value.render()
    assert len(requests) == 1  # a refusal is not retried
