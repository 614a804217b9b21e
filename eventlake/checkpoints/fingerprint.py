"""The plan fingerprint: what a flow's checkpoint was written by.

Written as ``<checkpoint>/eventlake-flow.json`` when a flow first starts; compared before
every later start (rule EL-V006), because a checkpoint's offsets and state only make sense
to the plan that wrote them.
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


def write_fingerprint(checkpoint: Location | Path, fingerprint: Fingerprint) -> None:
    """Record ``fingerprint`` unless the checkpoint already has one."""
    mark = Location(checkpoint) / FINGERPRINT
    fs = filesystem(mark)
    if not fs.exists(mark):
        fs.write_text(mark, json.dumps(fingerprint.as_dict(), indent=2))
