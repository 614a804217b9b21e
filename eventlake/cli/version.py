"""`eventlake version`: eventlake and the stack it runs on, as installed here."""

from __future__ import annotations

import platform
import re
from importlib.metadata import PackageNotFoundError, requires, version

from eventlake.errors import EventlakeError
from eventlake.paths import BROKER_JARS, SPARK_JARS, jar_files

#: Jars worth naming: what Spark loads by path, and the broker's Kafka.
KEY_JARS = {
    SPARK_JARS: ("delta-spark_4.2_2.13", "delta-storage", "spark-sql-kafka-0-10_2.13",
                 "kafka-clients", "postgresql"),
    BROKER_JARS: ("kafka-server", "kafka-clients"),
}  # fmt: skip
_REQUIREMENT = re.compile(r"^([A-Za-z0-9_.\-]+)")
_JAR_VERSION = re.compile(r"-(\d+(?:\.\d+)+[^-]*)\.jar$")


def stack() -> list[tuple[str, str]]:
    """(component, version or where it is) for eventlake, Python, its pinned Python
    dependencies and the key jars."""
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
        try:
            jars = [j.name for j in jar_files(kind)]
        except EventlakeError:
            rows.append((f"jars ({kind})", "missing: run `make jars`"))
            continue
        found = {_JAR_VERSION.sub("", jar): jar.removesuffix(".jar") for jar in jars}
        rows.extend((f"jar ({kind})", found[a]) for a in artifacts if a in found)
    return rows
