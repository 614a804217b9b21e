"""Which batch of a Delta-reading stream read each file of its source table, from the
offsets its checkpoint logged (``verify`` of a medallion's silver and gold flows).

Delta's streaming source numbers the files it reads: a stream that starts from the table
as it is reads that snapshot first, its files sorted by (modification time, path) and
indexed from 0 (offsets with ``isStartingVersion``); then each later version's data files,
in the order its commit lists them, indexed from 0 (index -1: the version's start, none of
its files). A batch's end offset ``(reservoirVersion, index)`` covers every file up to it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from eventlake.connectors.delta.commits import log_file
from eventlake.storage import Location, filesystem

#: A file's or an offset's position in the stream: (0 snapshot | 1 later version, version,
#: index).
Position = tuple[int, int, int]


def _position(offset: dict[str, Any]) -> Position:
    phase = 0 if offset.get("isStartingVersion") else 1
    return (phase, int(offset["reservoirVersion"]), int(offset["index"]))


def _name(path: str) -> str:
    return unquote(path).rsplit("/", 1)[-1]


def _commit(log: Location, version: int) -> list[dict[str, Any]]:
    entry = log_file(log, version)
    try:
        text = filesystem(entry).read_text(entry)
    except FileNotFoundError:
        raise NotImplementedError(
            f"version {version} of the table's log was cleaned up (log retention)"
        ) from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _snapshot(log: Location, version: int) -> list[tuple[int, str]]:
    """(modification time, name) of each data file of the table at ``version``."""
    files: dict[str, tuple[int, str]] = {}
    for v in range(version + 1):
        for action in _commit(log, v):
            if "add" in action:
                add = action["add"]
                files[add["path"]] = (int(add["modificationTime"]), add["path"])
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
    return sorted(files.values())


def replayed_files(
    table: Location, offsets: Sequence[dict[str, Any]], starting_version: int | None = None
) -> tuple[dict[str, int], int]:
    """For a stream whose batches 0..n ended at ``offsets``: each file it read (by name)
    with the batch that read it, and the table version at which all of them are read."""
    if not offsets:
        return {}, 0
    log = table / "_delta_log"
    first = offsets[0]
    positions: list[tuple[Position, str]] = []
    if first.get("isStartingVersion"):
        start = int(first["reservoirVersion"])
        snapshot = _snapshot(log, start)
        positions += [((0, start, i), path) for i, (_, path) in enumerate(snapshot)]
        start += 1
    elif starting_version is not None:
        start = starting_version
    else:
        raise NotImplementedError(
            "the stream started at the table's latest version or a timestamp, which its "
            "checkpoint does not record"
        )
    end = _position(offsets[-1])
    # Through the last offset's version when it names one of its files; index -1 names
    # the start of a version not read (often not written yet).
    last = (end[1] if end[2] >= 0 else end[1] - 1) if end[0] == 1 else start - 1
    for version in range(start, last + 1):
        adds = [a["add"] for a in _commit(log, version) if "add" in a and a["add"]["dataChange"]]
        positions += [((1, version, i), add["path"]) for i, add in enumerate(adds)]
    ends = [_position(o) for o in offsets]
    read_by: dict[str, int] = {}
    batch = 0
    for position, path in sorted(positions):
        while batch < len(ends) and position > ends[batch]:
            batch += 1
        if batch == len(ends):
            break  # beyond the last batch's end: not read yet
        read_by[_name(path)] = batch
    version = end[1] if end[0] == 0 or end[2] >= 0 else end[1] - 1
    return read_by, version
