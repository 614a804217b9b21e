"""eventlake: exactly-once streaming from Kafka and files into Delta Lake on Spark."""

from __future__ import annotations

from eventlake.errors import EventlakeError

__all__ = ["EventlakeError", "__version__"]
__version__ = "0.1.0"
