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


def read_fingerprint(checkpoint: Path) -> dict[str, Any] | None:
    """The recorded fingerprint of ``checkpoint``, or None when none was written."""
    mark = checkpoint / FINGERPRINT
    if not mark.is_file():
        return None
    data: dict[str, Any] = json.loads(mark.read_text())
    return data


def write_fingerprint(checkpoint: Path, fingerprint: Fingerprint) -> None:
    """Record ``fingerprint`` unless the checkpoint already has one."""
    mark = checkpoint / FINGERPRINT
    if not mark.exists():
        checkpoint.mkdir(parents=True, exist_ok=True)
        mark.write_text(json.dumps(fingerprint.as_dict(), indent=2))
