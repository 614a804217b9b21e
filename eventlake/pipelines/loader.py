"""Finding pipelines: the shipped ones, installed entry points, and users' own files."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.api import REGISTRY, Registry

ENTRY_POINT_GROUP = "eventlake.pipelines"


def load_module(path: Path) -> None:
    """Import a Python file; the pipelines it creates register themselves."""
    path = path.absolute()
    if not path.is_file():
        raise EventlakeError(
            ErrorCode.PIPELINE_MODULE,
            f"pipeline module {path} does not exist.",
            expected="a .py file that creates eventlake Pipeline objects",
            fix="pass the right --module path",
        )
    name = f"eventlake_user_{path.stem}_{abs(hash(str(path))):x}"
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise EventlakeError(ErrorCode.PIPELINE_MODULE, f"cannot import {path} as Python.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except EventlakeError:
        raise
    except Exception as exc:
        del sys.modules[name]
        raise EventlakeError(
            ErrorCode.PIPELINE_MODULE,
            f"importing pipeline module {path} failed: {type(exc).__name__}: {exc}",
            fix="fix the error in that file (run it with python to see the traceback)",
        ) from exc


def load_pipelines(modules: Iterable[Path] = ()) -> Registry:
    """The registry with the shipped pipelines, entry-point packages and ``modules``."""
    importlib.import_module("eventlake.reference")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:
            raise EventlakeError(
                ErrorCode.PIPELINE_MODULE,
                f"loading pipeline entry point '{ep.name}' ({ep.value}) failed: {exc}",
                fix="fix or uninstall the package that declares it",
            ) from exc
    for path in modules:
        load_module(path)
    return REGISTRY
