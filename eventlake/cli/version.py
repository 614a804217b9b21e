"""`eventlake version`: eventlake and the stack it runs on, as installed here."""

from __future__ import annotations

import os
import platform
import re
from importlib.metadata import PackageNotFoundError, requires, version

from eventlake.class_archive import archive_path
from eventlake.jars import (
    BROKER_JARS,
    JARS_DIR_ENV,
    REPOSITORY_ENV,
    SPARK_JARS,
    cache_dir,
    locked,
    missing,
    repository_url,
)
from eventlake.jvm_code import own_jar_path, spark_jars
from eventlake.secrets import mask_text

#: Jars worth naming: what Spark loads by path, and the broker's Kafka.
KEY_JARS = {
    SPARK_JARS: ("delta-spark_4.2_2.13", "delta-storage", "spark-sql-kafka-0-10_2.13",
                 "kafka-clients", "postgresql"),
    BROKER_JARS: ("kafka-server", "kafka-clients"),
}  # fmt: skip
_REQUIREMENT = re.compile(r"^([A-Za-z0-9_.\-]+)")


def stack() -> list[tuple[str, str]]:
    """(component, version or where it is) for eventlake, Python, its Python dependencies,
    the key jars of the lock, and where the jars come from."""
    rows = [("eventlake", version("eventlake")), ("python", platform.python_version())]
    for requirement in requires("eventlake") or []:
        if "extra ==" in requirement:
            continue  # dev tools
        match = _REQUIREMENT.match(requirement)
        if match is None:
            continue
        name = match.group(1)
        try:
            rows.append((name, version(name)))
        except PackageNotFoundError:
            rows.append((name, "not installed"))
    for kind, artifacts in KEY_JARS.items():
        jars = {jar.artifact: jar for jar in locked(kind)}
        rows.extend((f"jar ({kind})", jars[a].coordinates) for a in artifacts if a in jars)
    env = " (EVENTLAKE_JARS_DIR)" if os.environ.get(JARS_DIR_ENV) else ""
    rows.append(("jar cache", f"{cache_dir()}{env}"))
    source = " (EVENTLAKE_MAVEN_REPOSITORY)" if os.environ.get(REPOSITORY_ENV) else ""
    rows.append(("jar repository", f"{mask_text(repository_url())}{source}"))
    lacking = {kind: len(missing([kind])) for kind in KEY_JARS}
    for kind, count in lacking.items():
        state = "cached" if not count else f"{count} to download on first use"
        rows.append((f"jars ({kind})", f"{len(locked(kind))} locked, {state}"))
    ready = not lacking[SPARK_JARS] and own_jar_path().is_file()
    archive = archive_path(spark_jars()) if ready else None
    if archive is not None and archive.is_file():
        rows.append(("class archive", f"{archive} ({archive.stat().st_size / 1e6:.0f} MB)"))
    else:
        rows.append(("class archive", "none: `eventlake jars fetch` records it"))
    return rows
