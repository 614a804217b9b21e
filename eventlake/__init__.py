"""eventlake: exactly-once streaming from Kafka and files into Delta Lake on Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eventlake.errors import EventlakeError

if TYPE_CHECKING:
    from eventlake.run import run_pipeline

__all__ = ["EventlakeError", "__version__", "run_pipeline"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "run_pipeline":  # imported on first use: `import eventlake` stays light
        from eventlake.run import run_pipeline

        return run_pipeline
    raise AttributeError(f"module 'eventlake' has no attribute {name!r}")
