"""Finding pipelines: a project's own files, installed entry points, and eventlake's
examples when the project opts in.

Each load collects the pipelines into a registry of its own: nothing is global, so two
loads (or two tests) never see each other's pipelines.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from eventlake.errors import ErrorCode, EventlakeError
from eventlake.pipelines.api import Pipeline, Registry, registration

if TYPE_CHECKING:
    from eventlake.config import Settings

ENTRY_POINT_GROUP = "eventlake.pipelines"
EXAMPLES_PACKAGE = "eventlake.reference"
#: Users' files are imported as ``eventlake_user_<stem>_<hash of the path>``.
USER_MODULE_PREFIX = "eventlake_user_"


def load_module(path: Path) -> ModuleType:
    """Import a Python file (once per process) and return the module."""
    path = path.absolute()
    if not path.is_file():
        raise EventlakeError(
            ErrorCode.PIPELINE_MODULE,
            f"pipeline module {path} does not exist.",
            fix="pass the right --module path",
        )
    name = f"{USER_MODULE_PREFIX}{path.stem}_{abs(hash(str(path))):x}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise EventlakeError(ErrorCode.PIPELINE_MODULE, f"cannot import {path} as Python.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except EventlakeError:
        del sys.modules[name]
        raise
    except Exception as exc:
        del sys.modules[name]
        raise EventlakeError(
            ErrorCode.PIPELINE_MODULE,
            f"importing pipeline module {path} failed: {type(exc).__name__}: {exc}",
        ) from exc
    return module


def _example_modules() -> list[ModuleType]:
    package = importlib.import_module(EXAMPLES_PACKAGE)
    return [importlib.import_module(f"{EXAMPLES_PACKAGE}.{n}") for n in package.__all__]


def load_pipelines(
    modules: Iterable[Path] = (), registry: Registry | None = None, *, examples: bool = False
) -> Registry:
    """A registry with the pipelines of ``modules`` and of entry-point packages, and with
    ``examples`` eventlake's example pipelines whose names those leave free."""
    registry = registry if registry is not None else Registry()
    with registration(registry):
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded = ep.load()
            except Exception as exc:
                raise EventlakeError(
                    ErrorCode.PIPELINE_MODULE,
                    f"loading pipeline entry point '{ep.name}' ({ep.value}) failed: {exc}",
                    fix="fix or uninstall the package that declares it",
                ) from exc
            if isinstance(loaded, Pipeline):
                registry.add(loaded)
            elif isinstance(loaded, ModuleType):
                registry.collect(loaded)
        for path in modules:
            registry.collect(load_module(path))
    if examples:
        shipped = Registry()
        with registration(shipped):
            for module in _example_modules():
                shipped.collect(module)
        taken = set(registry.names())
        for name in shipped.names():
            if name not in taken:
                registry.add(shipped.get(name))
    return registry


def project_pipelines(settings: Settings, modules: Iterable[Path] = ()) -> Registry:
    """The project's pipelines: ``project.modules``, then ``modules`` (``--module``), the
    entry points, and the examples when ``project.examples`` says so."""
    paths = dict.fromkeys([*settings.project_modules(), *(Path(m).absolute() for m in modules)])
    registry = load_pipelines(list(paths), examples=settings.project.examples)
    if not settings.project.examples:
        hint = "it is one of eventlake's examples: set project.examples: true to load them"
        registry.hints = {name: hint for name in _example_names()}
    return registry


def _example_names() -> list[str]:
    package = importlib.import_module(EXAMPLES_PACKAGE)
    return list(package.__all__)
