"""The JVM jars eventlake gives Spark and the broker: locked, downloaded once, verified.

``resources/jars.lock.json`` names each jar set's exact Maven coordinates, size and SHA-256
(generated from ``jvm/*/pom.xml`` by ``make lock-jars``). The first use of a set downloads
what is missing from a Maven repository (Maven Central, or a mirror) into the jar cache,
checks every file against the lock, and keeps it there in the repository's own layout.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.paths import user_cache_dir
from eventlake.secrets import mask_text

JARS_DIR_ENV = "EVENTLAKE_JARS_DIR"
REPOSITORY_ENV = "EVENTLAKE_MAVEN_REPOSITORY"
CENTRAL = "https://repo1.maven.org/maven2"
LOCK_FILE = "jars.lock.json"

SPARK_JARS = "spark"
BROKER_JARS = "kafka-broker"
HDFS_TEST_JARS = "hdfs-test"
FLINK_BENCH_JARS = "flink-bench"

#: Called with (jar, bytes done, bytes of the jar) while a jar downloads.
Progress = Callable[["LockedJar", int, int], None]


@dataclass(frozen=True)
class LockedJar:
    """One jar of the lock: Maven coordinates, size and SHA-256."""

    group: str
    artifact: str
    version: str
    sha256: str
    size: int
    classifier: str = ""

    @property
    def file_name(self) -> str:
        suffix = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{suffix}.jar"

    @property
    def relative_path(self) -> str:
        """Its path in a Maven repository (and in the jar cache)."""
        return "/".join([*self.group.split("."), self.artifact, self.version, self.file_name])

    @property
    def coordinates(self) -> str:
        parts = [self.group, self.artifact, self.version]
        return ":".join([*parts, self.classifier] if self.classifier else parts)


@cache
def locked_sets() -> dict[str, tuple[LockedJar, ...]]:
    """Every jar set of the lock shipped in the package, by name."""
    text = resources.files("eventlake.resources").joinpath(LOCK_FILE).read_text()
    data = json.loads(text)
    return {
        name: tuple(LockedJar(**jar) for jar in entry["jars"])
        for name, entry in data["sets"].items()
    }


def locked(kind: str) -> tuple[LockedJar, ...]:
    """The jars of one set; EL-JARS-001 for a set the lock does not have."""
    sets = locked_sets()
    if kind not in sets:
        raise EventlakeError(
            ErrorCode.JARS_MISSING,
            f"no jar set '{kind}' in eventlake's jar lock.",
            expected=f"one of: {', '.join(sets)}",
            fix="name one of those sets",
        )
    return sets[kind]


def cache_dir() -> Path:
    """Where the jars live: ``EVENTLAKE_JARS_DIR``, else the user's cache folder."""
    env = os.environ.get(JARS_DIR_ENV)
    if env:
        return Path(env).absolute()
    return user_cache_dir() / "jars"


def repository_url(configured: str | None = None) -> str:
    """The Maven repository to download from: the config's, ``EVENTLAKE_MAVEN_REPOSITORY``,
    else Maven Central."""
    return (configured or os.environ.get(REPOSITORY_ENV) or CENTRAL).rstrip("/")


def _present(jar: LockedJar, root: Path) -> bool:
    path = root / jar.relative_path
    return path.is_file() and path.stat().st_size == jar.size


def missing(kinds: Iterable[str]) -> list[LockedJar]:
    """The jars of ``kinds`` not yet in the cache (each jar once)."""
    root = cache_dir()
    seen: dict[str, LockedJar] = {}
    for kind in kinds:
        for jar in locked(kind):
            if not _present(jar, root):
                seen.setdefault(jar.relative_path, jar)
    return list(seen.values())


def _request(url: str) -> urllib.request.Request:
    """A GET of ``url``, its user:password (a company mirror's) sent as Basic auth."""
    parts = urllib.parse.urlsplit(url)
    headers = {"User-Agent": "eventlake"}
    if parts.username is not None:
        user, password = parts.username, parts.password or ""
        login = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
        headers["Authorization"] = "Basic " + base64.b64encode(login.encode()).decode()
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return urllib.request.Request(url, headers=headers)


def download(jar: LockedJar, repository: str, root: Path, progress: Progress | None = None) -> Path:
    """Download one jar from ``repository`` to its place under ``root``, checked against
    the lock (EL-JARS-002 when it does not match or cannot be had)."""
    url = f"{repository}/{jar.relative_path}"
    target = root / jar.relative_path
    target.parent.mkdir(parents=True, exist_ok=True)
    last: Exception | None = None
    for attempt in range(3):
        if attempt:
            time.sleep(2.0 * attempt)
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(prefix=f".{jar.file_name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(_request(url), timeout=60) as r:
                done = 0
                while chunk := r.read(1 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(jar, done, jar.size)
            if digest.hexdigest() != jar.sha256:
                raise EventlakeError(
                    ErrorCode.JARS_FETCH_FAILED,
                    f"{mask_text(url)} does not match eventlake's jar lock "
                    f"(SHA-256 {digest.hexdigest()}, locked {jar.sha256}).",
                    expected=f"the exact {jar.coordinates} that Maven Central serves",
                    fix=f"point {REPOSITORY_ENV} at a repository that mirrors Maven Central "
                    "unchanged",
                )
            os.replace(tmp, target)
            return target
        except EventlakeError:
            raise
        except urllib.error.HTTPError as exc:
            last = exc
            if exc.code in (401, 403, 404):
                break
        except (OSError, urllib.error.URLError) as exc:
            last = exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    raise EventlakeError(
        ErrorCode.JARS_FETCH_FAILED,
        f"downloading {jar.coordinates} from {mask_text(url)} failed: {last}",
        expected=f"a Maven repository that serves {jar.relative_path}",
        fix=f"check the network, set {REPOSITORY_ENV} to a reachable mirror, or fill "
        f"{JARS_DIR_ENV} with `eventlake jars fetch` where the repository is reachable",
    ) from None


def fetch(
    kinds: Iterable[str],
    *,
    repository: str | None = None,
    progress: Progress | None = None,
) -> list[LockedJar]:
    """Download the jars of ``kinds`` that the cache lacks; returns those it downloaded."""
    needed = missing(kinds)
    root = cache_dir()
    repo = repository_url(repository)
    for jar in needed:
        download(jar, repo, root, progress)
    return needed


def jar_files(kind: str, *, repository: str | None = None) -> list[Path]:
    """The jars of one set, downloaded first when the cache lacks any (one line on stderr
    says so: the first use of a set takes a while)."""
    needed = missing([kind])
    if needed:
        megabytes = sum(j.size for j in needed) / 1e6
        source = mask_text(repository_url(repository))
        print(f"eventlake: downloading {len(needed)} {kind} jars ({megabytes:.0f} MB) "
              f"from {source} into {cache_dir()}", file=sys.stderr)  # fmt: skip
        fetch([kind], repository=repository)
    root = cache_dir()
    return [root / jar.relative_path for jar in locked(kind)]
