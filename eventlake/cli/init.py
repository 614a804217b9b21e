"""`eventlake init DIR`: a project a user can run and test at once."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from eventlake.errors import ErrorCode, EventlakeError

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

TEMPLATE = "project"
#: Template names that are not their file's name in the project.
RENAMED = {"gitignore": ".gitignore"}


def _templates(folder: Traversable, prefix: Path = Path()) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            found += _templates(entry, prefix / entry.name)
        elif entry.name.endswith(".tmpl"):
            name = entry.name.removesuffix(".tmpl")
            found.append((prefix / RENAMED.get(name, name), entry.read_text()))
    return found


def scaffold(target: Path) -> list[Path]:
    """Write the project template into ``target``; refuses to overwrite any file."""
    files = _templates(resources.files("eventlake.resources").joinpath(TEMPLATE))
    taken = [str(rel) for rel, _ in files if (target / rel).exists()]
    if taken:
        raise EventlakeError(
            ErrorCode.PROJECT_EXISTS,
            f"{target} already holds {', '.join(taken)}.",
            fix="run `eventlake init` in an empty folder, or move those files away",
        )
    written = []
    for rel, text in files:
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


FolderArg = Annotated[Path, typer.Argument(help="The project folder (created if missing).")]


def init(directory: FolderArg = Path()) -> None:
    """Start a project: eventlake.yaml, a sample pipeline (Kafka -> bronze -> silver with
    expectations and a quarantine), its pytest test, .gitignore and a README."""
    target = directory.absolute()
    written = scaffold(target)
    for path in written:
        typer.echo(f"  wrote {path.relative_to(target)}")
    here = "" if target == Path.cwd() else f"cd {directory} && "
    typer.echo(
        f"\nA project in {target}. Next:\n"
        f"  {here}pytest                 # the sample's test, on a real broker and Spark\n"
        "  eventlake kafka start && eventlake kafka create-topic events --exist-ok "
        "&& eventlake run events"
    )
