"""The driver process's C heap handed back to the system while a run lasts.

glibc keeps the memory that the driver's native code (librdkafka, delta-rs, pyarrow,
Python's larger objects) frees, for reuse; over hours of batches what it holds free grows
(the soak: +7 MiB an hour, all given back by one trim at its end). ``malloc_trim(0)``
returns the free pages inside every arena and the main arena's free top; a thread's own
arena keeps its top, so a run's threads share the main arena (``spark.driver_arenas``,
:func:`eventlake.allocator.limit_arenas`). The driver JVM trims its own C heap (HotSpot's
periodic trim); this does the same for the Python process, at the same interval
(``spark.native_trim_seconds``).
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

Trim = Callable[[], None]
#: The name of the thread that trims.
TRIM_THREAD = "eventlake-native-trim"


def malloc_trim() -> Trim | None:
    """glibc's ``malloc_trim(0)`` for this process, or None where the C library has none
    (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def call() -> None:
        trim(0)

    return call


class NativeTrim:
    """A run's service: every ``seconds`` the process's C allocator gives back what it holds
    free (nothing when ``seconds`` is 0 or the C library cannot trim)."""

    def __init__(self, seconds: float, trim: Trim | None = None) -> None:
        self.seconds = seconds
        self.trims = 0
        self._trim = trim if trim is not None else malloc_trim()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.seconds > 0 and self._trim is not None

    def start(self) -> None:
        if not self.active:
            log.info("not trimming the driver's C heap (interval %s s)", self.seconds)
            return
        self._thread = threading.Thread(target=self._run, name=TRIM_THREAD, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._trim is not None
        while not self._stop.wait(self.seconds):
            try:
                self._trim()
            except Exception as e:  # the run goes on with a heap not trimmed
                log.warning("trimming the driver's C heap failed: %s", e)
                return
            self.trims += 1

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
