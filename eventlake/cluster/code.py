"""Shipping eventlake and the user's pipeline modules to a cluster's executors.

Executors unpickle Python UDFs and ``transformWithState`` processors by importing the module
that defined them. A cluster's workers need not have eventlake installed: the driver builds
one zip of the ``eventlake`` package and every ``--module`` file it loaded (each under the
module name it was loaded as) and adds it with ``SparkContext.addPyFile``, which puts it on
every executor's Python path.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from eventlake.pipelines.loader import USER_MODULE_PREFIX

if TYPE_CHECKING:
    from pyspark import SparkContext


def _package_files() -> list[tuple[str, Path]]:
    import eventlake

    root = Path(eventlake.__file__).parent
    files = [
        (f"eventlake/{p.relative_to(root).as_posix()}", p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]
    return files


def _user_modules() -> list[tuple[str, Path]]:
    modules = []
    for name, module in sorted(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name.startswith(USER_MODULE_PREFIX) and file:
            modules.append((f"{name}.py", Path(file)))
    return modules


def code_archive(folder: Path | None = None) -> Path:
    """The zip of eventlake and the loaded user modules, named by its content."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for arcname, path in _package_files() + _user_modules():
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    data = buffer.getvalue()
    folder = folder or Path(tempfile.gettempdir()) / "eventlake-code"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"eventlake-code-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not path.is_file():
        partial = path.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(path)
    return path


def ship_code(sc: SparkContext, folder: Path | None = None) -> Path:
    """Put :func:`code_archive` (written to ``folder``) on the Python path of every
    executor (once per content), and of the Python workers Spark starts on the driver
    (transformWithState's), which read the functions' environment but not the added
    files. The driver serves the file from there for the life of the run."""
    path = code_archive(folder)
    if path.name not in (sc._python_includes or []):
        sc.addPyFile(str(path))
        before = sc.environment.get("PYTHONPATH")
        sc.environment["PYTHONPATH"] = os.pathsep.join([str(path), *([before] if before else [])])
    return path
