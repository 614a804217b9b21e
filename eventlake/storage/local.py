"""Local folders, through Python's own file API (no JVM needed)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from eventlake.storage.base import Location


class LocalStorage:
    """The :class:`~eventlake.storage.base.Storage` of local paths."""

    def exists(self, location: Location) -> bool:
        return location.path.exists()

    def is_dir(self, location: Location) -> bool:
        return location.path.is_dir()

    def is_file(self, location: Location) -> bool:
        return location.path.is_file()

    def list_names(self, location: Location) -> list[str]:
        path = location.path
        return sorted(p.name for p in path.iterdir()) if path.is_dir() else []

    def read_text(self, location: Location) -> str:
        return location.path.read_text()

    def write_text(self, location: Location, text: str) -> None:
        path = location.path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)

    def mkdirs(self, location: Location) -> None:
        location.path.mkdir(parents=True, exist_ok=True)

    def copy_to_local(self, location: Location, target: Path) -> None:
        source = location.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy(source, target)

    def delete(self, location: Location) -> None:
        path = location.path
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()

    def modified(self, location: Location) -> float | None:
        try:
            return location.path.stat().st_mtime
        except FileNotFoundError:
            return None

    def size(self, location: Location) -> int:
        path = location.path
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
