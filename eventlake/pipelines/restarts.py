"""When a failed flow restarts: the restart strategy of its pipeline, applied to one flow.

The runner asks :meth:`RestartPolicy.next_delay` at each failure whose recovery is not
fatal; None means give up (the run stops, every other flow between batches, and the
command exits non-zero naming the error).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from eventlake.config import RestartSettings
from eventlake.durations import duration_ms


def _seconds(interval: str) -> float:
    return duration_ms(interval) / 1000.0


@dataclass
class RestartPolicy:
    """One flow's restarts under ``settings``; ``finite`` for available-now and once."""

    settings: RestartSettings
    finite: bool = False
    rng: random.Random = field(default_factory=random.Random)
    #: Restarts in a row since the last reset (exponential and fixed delay).
    attempt: int = 0
    #: Every restart of this flow in the run.
    restarts: int = 0
    _failures: deque[float] = field(default_factory=deque)
    _last_restart: float | None = None

    @property
    def budget(self) -> int | None:
        """Restarts in a row allowed (None: no bound)."""
        attempts = self.settings.attempts
        if not self.finite:
            return attempts
        finite = self.settings.finite_attempts
        return finite if attempts is None else min(attempts, finite)

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before restarting a flow that failed at ``now`` (monotonic
        seconds), or None when the strategy gives up."""
        s = self.settings
        if s.strategy == "none":
            return None
        if self._last_restart is not None and now - self._last_restart >= _seconds(s.reset_after):
            self.attempt = 0  # it ran long enough: a new streak of failures
        budget = self.budget
        if budget is not None and self.attempt >= budget:
            return None
        if s.strategy == "failure-rate":
            self._failures.append(now)
            while self._failures and now - self._failures[0] > _seconds(s.failure_interval):
                self._failures.popleft()
            if len(self._failures) > s.failures_per_interval:
                return None
            delay = _seconds(s.delay)
        elif s.strategy == "fixed-delay":
            delay = _seconds(s.delay)
        else:
            base = _seconds(s.initial_delay) * s.multiplier**self.attempt
            delay = min(base, _seconds(s.max_delay))
            delay *= 1.0 + self.rng.uniform(-s.jitter, s.jitter)
        self.attempt += 1
        self.restarts += 1
        self._last_restart = now + delay
        return delay
