"""SIGINT/SIGTERM become a request to stop between batches, not a crash."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console


@contextmanager
def stop_on_signals(console: Console) -> Iterator[threading.Event]:
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        console.print(f"{signal.Signals(signum).name}: stopping at the next batch boundary")
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
