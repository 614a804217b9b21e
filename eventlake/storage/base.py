"""Where lake tables and checkpoints live: a local folder or a URI of a Hadoop filesystem.

A :class:`Location` names a place (``/data/lake``, ``hdfs://nn:8020/lake``,
``s3a://bucket/lake``); :func:`eventlake.storage.filesystem` gives the :class:`Storage`
that reads and writes it. Spark reads and writes every location itself; eventlake's own
files (checkpoint logs, the plan fingerprint, the status files) go through the same
storage, so a checkpoint on HDFS is read from HDFS.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


class Location:
    """An absolute local path, or a URI with a scheme (``hdfs://host:port/path``).

    Relative local paths are made absolute against the working directory when the
    location is made; ``file://`` URIs are local paths.
    """

    __slots__ = ("_text",)
    _text: str

    def __init__(self, value: str | os.PathLike[str] | Location) -> None:
        text: str
        if isinstance(value, Location):
            text = value._text
        else:
            text = os.fspath(value)
            if text.startswith("file://"):
                text = text[len("file://") :]
            elif text.startswith("file:"):
                text = text[len("file:") :]
            if not _SCHEME.match(text):
                text = str(Path(text).absolute())
            else:
                text = text.rstrip("/") if not text.endswith("://") else text
        self._text = text

    @property
    def scheme(self) -> str:
        """``hdfs``, ``s3a``...; ``file`` for a local path."""
        found = _SCHEME.match(self._text)
        return found.group(1).lower() if found else "file"

    @property
    def is_local(self) -> bool:
        return self.scheme == "file"

    @property
    def path(self) -> Path:
        """The local path; ValueError for a URI of another filesystem."""
        if not self.is_local:
            raise ValueError(f"{self._text} is not a local path")
        return Path(self._text)

    def _split(self) -> tuple[str, PurePosixPath]:
        found = _SCHEME.match(self._text)
        if not found:
            return "", PurePosixPath(self._text)
        rest = self._text[found.end() :]
        authority, _, path = rest.partition("/")
        return self._text[: found.end()] + authority, PurePosixPath("/" + path)

    @property
    def name(self) -> str:
        return self._split()[1].name

    @property
    def parent(self) -> Location:
        prefix, path = self._split()
        return Location(prefix + str(path.parent) if prefix else str(path.parent))

    def __truediv__(self, part: str) -> Location:
        prefix, path = self._split()
        joined = str(path / part)
        return Location(prefix + joined if prefix else joined)

    def joinpath(self, *parts: str) -> Location:
        out = self
        for part in parts:
            out = out / part
        return out

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Location({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            cls._validate, serialization=core_schema.to_string_ser_schema()
        )

    @classmethod
    def _validate(cls, value: object) -> Location:
        if isinstance(value, (str, os.PathLike, Location)):
            return cls(value)
        raise ValueError(f"expected a path or a URI, got {type(value).__name__}")


class Storage(Protocol):
    """The file operations eventlake performs itself (Spark does its own)."""

    def exists(self, location: Location) -> bool: ...

    def is_dir(self, location: Location) -> bool: ...

    def is_file(self, location: Location) -> bool: ...

    def list_names(self, location: Location) -> list[str]:
        """The names in a folder; empty when it does not exist."""
        ...

    def read_text(self, location: Location) -> str: ...

    def write_text(self, location: Location, text: str) -> None:
        """Replace the file's content as a whole: readers see the old text or the new,
        never part of it (parent folders are made)."""
        ...

    def mkdirs(self, location: Location) -> None: ...

    def copy_to_local(self, location: Location, target: Path) -> None:
        """Copy a file, or a folder with everything in it, to the local ``target``."""
        ...

    def delete(self, location: Location) -> None:
        """Delete a file or a folder with everything in it (nothing when absent)."""
        ...

    def modified(self, location: Location) -> float | None:
        """The file's modification time (Unix seconds), or None when it does not exist."""
        ...

    def size(self, location: Location) -> int:
        """The bytes of a file, or of every file under a folder."""
        ...
