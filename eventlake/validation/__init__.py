"""`eventlake validate`: the production checklist, checked before a query starts."""

from __future__ import annotations

from eventlake.validation.check import Report, check_pipeline, require_valid
from eventlake.validation.rules import RULES, Finding

__all__ = ["RULES", "Finding", "Report", "check_pipeline", "require_valid"]
