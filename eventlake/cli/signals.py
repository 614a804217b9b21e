"""SIGINT/SIGTERM become a request to stop between batches, not a crash."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

from eventlake.session import STOP_HANDLER


class _StopHandler:
    """Sets ``stop`` on a signal; marked so Spark's start keeps it (eventlake.session)."""

    def __init__(self, stop: threading.Event, console: Console) -> None:
        self.stop, self.console = stop, console
        setattr(self, STOP_HANDLER, True)

    def __call__(self, signum: int, _frame: object) -> None:
        self.console.print(f"{signal.Signals(signum).name}: stopping at the next batch boundary")
        self.stop.set()


@contextmanager
def stop_on_signals(console: Console) -> Iterator[threading.Event]:
    stop = threading.Event()
    handler = _StopHandler(stop, console)
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
