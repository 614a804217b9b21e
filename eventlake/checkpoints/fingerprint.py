"""The plan fingerprint: what a flow's checkpoint was written by.

Written as ``<checkpoint>/eventlake-flow.json`` when a flow first starts; compared before
every later start (rules EL-V006 and EL-W110), because a checkpoint's offsets and state only
make sense to the plan that wrote them. A later start records the sink, output mode and
watermarks it runs with, so a change EL-W110 warned of is warned of once.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eventlake.storage import Location, filesystem

FINGERPRINT = "eventlake-flow.json"


@dataclass(frozen=True)
class Fingerprint:
    flow: str
    source: str
    sink: str
    output_mode: str
    stateful: tuple[str, ...]
    #: ``column delay`` of each watermark (absent from fingerprints written before it).
    watermarks: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stateful"] = list(self.stateful)
        data["watermarks"] = list(self.watermarks)
        return data


def read_fingerprint(checkpoint: Location | Path) -> dict[str, Any] | None:
    """The recorded fingerprint of ``checkpoint``, or None when none was written."""
    mark = Location(checkpoint) / FINGERPRINT
    fs = filesystem(mark)
    if not fs.is_file(mark):
        return None
    data: dict[str, Any] = json.loads(fs.read_text(mark))
    return data


#: What a flow may change and still resume (EL-W110's changes): recorded by every start.
RESULT_FIELDS = ("sink", "output_mode", "watermarks")


def write_fingerprint(checkpoint: Location | Path, fingerprint: Fingerprint) -> None:
    """Record ``fingerprint`` on a checkpoint that has none; on one that has, record its
    :data:`RESULT_FIELDS` (the run resumes with them, so they are the checkpoint's from
    now on). The source and the stateful operators stay as first recorded: they decide
    whether the checkpoint can resume at all (EL-V006)."""
    mark = Location(checkpoint) / FINGERPRINT
    fs = filesystem(mark)
    now = fingerprint.as_dict()
    if not fs.exists(mark):
        fs.write_text(mark, json.dumps(now, indent=2))
        return
    recorded = json.loads(fs.read_text(mark))
    updated = {**recorded, **{key: now[key] for key in RESULT_FIELDS}}
    if updated != recorded:
        fs.write_text(mark, json.dumps(updated, indent=2))
