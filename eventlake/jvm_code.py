"""eventlake's own JVM classes: Java sources shipped in the package (``resources/java``),
compiled once into a jar in the jar cache and given to Spark with the locked jars.

The compiler is Janino, which pyspark ships (Spark generates code with it), run by the
same ``java`` as Spark: a JRE is enough, no JDK or build step. The classes compile against
pyspark's jars and the locked ``spark`` set (Delta's). The jar's folder is named by a
digest of the sources, pyspark's version and the locked jars, so an upgrade of any
compiles anew.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

from eventlake.class_archive import java_binary
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.jars import SPARK_JARS, cache_dir, jar_files, locked

JAR_NAME = "eventlake-jvm.jar"
#: The classes of ``eventlake.fs`` (``InProcessLocalFileSystem``), in a jar of their own
#: beside :data:`JAR_NAME`: Spark loads a filesystem class before the jars it is given,
#: so this one goes on the driver JVM's class path. They need only Hadoop.
FS_JAR_NAME = "eventlake-fs.jar"
FS_PACKAGE = "eventlake/fs/"
#: A public main of commons-compiler that compiles like javac (``-d``, ``-classpath``).
COMPILER_MAIN = "org.codehaus.commons.compiler.samples.CompilerDemo"
#: Seconds: the compile takes about 1.5 s on 2 cores.
COMPILE_TIMEOUT = 300
_MANIFEST = b"Manifest-Version: 1.0\r\nCreated-By: eventlake\r\n\r\n"


def _sources() -> dict[str, bytes]:
    folder = resources.files("eventlake.resources").joinpath("java")
    return {f.name: f.read_bytes() for f in folder.iterdir() if f.name.endswith(".java")}


def _pyspark() -> tuple[str, Path]:
    """pyspark's version and its jars folder."""
    import pyspark

    return pyspark.__version__, Path(pyspark.__file__).parent / "jars"


def _jar_path(sources: dict[str, bytes], version: str) -> Path:
    digest = hashlib.sha256(version.encode())
    for jar in locked(SPARK_JARS):
        digest.update(jar.relative_path.encode() + b"\0")
    for name in sorted(sources):
        digest.update(name.encode() + b"\0" + sources[name])
    return cache_dir() / "eventlake" / digest.hexdigest()[:16] / JAR_NAME


def own_jar_path() -> Path:
    """Where eventlake's jar for these sources and this pyspark is (or will be) cached."""
    return _jar_path(_sources(), _pyspark()[0])


def own_jar(*, repository: str | None = None) -> Path:
    """eventlake's jar, compiled first when the cache lacks it (about 1.5 s, once; the
    locked jars it compiles against are downloaded first when missing), with
    :data:`FS_JAR_NAME` beside it."""
    sources = _sources()
    version, jars = _pyspark()
    target = _jar_path(sources, version)
    if target.is_file() and fs_jar(target).is_file():
        return target
    java = java_binary()
    if java is None:
        raise EventlakeError(
            ErrorCode.JAVA_MISSING,
            "no java found to compile eventlake's JVM classes.",
            expected="JAVA_HOME set, or java on PATH (the one Spark runs)",
            fix="install Java 17 or 21 and set JAVA_HOME",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".compile-", dir=target.parent) as tmp:
        work = Path(tmp)
        files = []
        for name, text in sources.items():
            (work / name).write_bytes(text)
            files.append(str(work / name))
        out = work / "classes"
        out.mkdir()
        linked = [*sorted(jars.glob("*.jar")), *jar_files(SPARK_JARS, repository=repository)]
        cp = os.pathsep.join(str(j) for j in linked)
        try:
            done = subprocess.run(
                [str(java), "-cp", cp, COMPILER_MAIN, "-d", str(out), "-classpath", cp, *files],
                capture_output=True, text=True, check=False, timeout=COMPILE_TIMEOUT,
            )  # fmt: skip
            message = (done.stderr or done.stdout).strip()[-2000:]
            failed = done.returncode != 0
        except (OSError, subprocess.TimeoutExpired) as exc:
            message, failed = str(exc), True
        classes = sorted(out.rglob("*.class"))
        if failed or not classes:
            raise EventlakeError(
                ErrorCode.JVM_CODE_FAILED,
                f"compiling eventlake's JVM classes with {java} failed: {message}",
            )
        names = {path: path.relative_to(out).as_posix() for path in classes}
        fs = [path for path, name in names.items() if name.startswith(FS_PACKAGE)]
        # Two processes compiling at once write the same jars; each rename is atomic, and
        # the main jar, whose presence says both are there, comes last.
        for name, members in ((FS_JAR_NAME, fs), (JAR_NAME, sorted(set(classes) - set(fs)))):
            jar = work / name
            with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr("META-INF/MANIFEST.MF", _MANIFEST)
                for path in members:
                    z.write(path, names[path])
            os.replace(jar, target.parent / name)
    return target


def fs_jar(own: Path) -> Path:
    """The jar of ``eventlake.fs`` beside eventlake's jar ``own``."""
    return own.parent / FS_JAR_NAME


def own_class(jvm: Any, name: str) -> Any:
    """The JVM class ``name`` (dotted) from eventlake's jar, or EL-JARS-004 when Spark was
    started without that jar."""
    from py4j.java_gateway import JavaClass

    found = jvm
    for part in name.split("."):
        found = getattr(found, part)
    if not isinstance(found, JavaClass):
        raise EventlakeError(
            ErrorCode.JVM_CODE_FAILED,
            f"the JVM has no class {name}: eventlake's jar is not on Spark's classpath.",
            expected="a session started by eventlake, or spark-submit given its jars",
            fix="start Spark with get_spark, or pass `eventlake jars path` to --jars",
        )
    return found


def spark_jars(*, repository: str | None = None) -> list[Path]:
    """What eventlake gives Spark: the locked ``spark`` jars and eventlake's own."""
    return [*jar_files(SPARK_JARS, repository=repository), own_jar(repository=repository)]
