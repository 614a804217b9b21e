"""The shared shape of event-time generators: a simulated clock, and late, out-of-order,
duplicate and malformed records mixed into the valid ones by fraction.

A subclass says how to make one event at a given event time (``_event``) and one
malformed record (``_malformed``). Reproducible by seed: the same seed and settings give
the same records in the same order.
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from eventlake.generator.base import GeneratedRecord

DEFAULT_START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def iso(ts: datetime) -> str:
    """ISO-8601 UTC text with milliseconds, as the generators write event times."""
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def to_json(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"))


@dataclass(frozen=True)
class EventStreamConfig:
    """Knobs every event-time generator shares."""

    seed: int = 0
    start: datetime = DEFAULT_START
    mean_gap_seconds: float = 2.0
    late_fraction: float = 0.0
    late_delay: timedelta = timedelta(minutes=15)
    out_of_order_fraction: float = 0.0
    out_of_order_max: timedelta = timedelta(minutes=3)
    duplicate_fraction: float = 0.0
    malformed_fraction: float = 0.0

    def __post_init__(self) -> None:
        total = (
            self.late_fraction
            + self.out_of_order_fraction
            + self.duplicate_fraction
            + self.malformed_fraction
        )
        if not 0 <= total <= 1:
            raise ValueError("late + out-of-order + duplicate + malformed fractions exceed 1")


class EventStream(ABC):
    """Stateful: successive ``records(n)`` calls continue the same stream.

    A valid event advances the clock by a random gap; a late event is ``late_delay``
    behind the clock, an out-of-order one up to ``out_of_order_max`` behind; a duplicate
    re-sends one of the last 20 records byte for byte.
    """

    key_field: str

    def __init__(self, config: EventStreamConfig) -> None:
        self.config = config
        self._rng = random.Random(config.seed)
        self._clock = config.start
        self._recent: deque[tuple[str | None, str, dict[str, Any]]] = deque(maxlen=20)

    @property
    def clock(self) -> datetime:
        """The newest event time generated so far."""
        return self._clock

    @abstractmethod
    def _event(self, event_time: datetime) -> dict[str, Any]:
        """A new valid event at ``event_time``."""

    #: Fields a valid event must carry: each has a ``missing_<field>`` malformed kind.
    required_fields: tuple[str, ...] = ()
    #: Unusable values per field: each field has an ``invalid_<field>`` malformed kind.
    bad_values: dict[str, tuple[Any, ...]] = {}  # noqa: RUF012
    #: Quarantine reasons this stream produces, derived from the two above: ``invalid_json``,
    #: ``missing_<field>`` (the field is left out), ``invalid_<field>`` (a bad value).
    malformed_reasons: tuple[str, ...] = ("invalid_json",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = tuple(f"missing_{f}" for f in cls.required_fields)
        invalid = tuple(f"invalid_{f}" for f in cls.bad_values)
        cls.malformed_reasons = ("invalid_json", *missing, *invalid)

    def _malformed(self) -> GeneratedRecord:
        """A record the pipeline must quarantine, with its expected reason."""
        rng = self._rng
        reason = rng.choice(self.malformed_reasons)
        event = self._event(self._clock)
        if reason == "invalid_json":
            value = rng.choice(['{"' + self.key_field + '": "x", "a": ', "not json", "[1, 2]"])
            return GeneratedRecord(event.get(self.key_field), value, "malformed", reason=reason)
        kind, _, name = reason.partition("_")
        if kind == "missing":
            del event[name]
        else:
            event[name] = rng.choice(self.bad_values[name])
        return GeneratedRecord(
            event.get(self.key_field), to_json(event), "malformed", reason=reason
        )

    def _emit(self, event: dict[str, Any], kind: str) -> GeneratedRecord:
        value = to_json(event)
        key = event.get(self.key_field)
        self._recent.append((key, value, event))
        return GeneratedRecord(key, value, kind, data=event)

    def _kind(self) -> str:
        c = self.config
        r = self._rng.random()
        bands = (
            ("malformed", c.malformed_fraction),
            ("duplicate", c.duplicate_fraction),
            ("late", c.late_fraction),
            ("out_of_order", c.out_of_order_fraction),
        )
        for name, fraction in bands:
            if r < fraction:
                return name
            r -= fraction
        return "valid"

    def next_record(self) -> GeneratedRecord:
        c, rng = self.config, self._rng
        kind = self._kind()
        if kind == "malformed":
            return self._malformed()
        if kind == "duplicate" and self._recent:
            key, value, event = rng.choice(list(self._recent))
            return GeneratedRecord(key, value, "duplicate", data=event)
        if kind == "late":
            return self._emit(self._event(self._clock - c.late_delay), "late")
        if kind == "out_of_order":
            back = timedelta(seconds=rng.uniform(0, c.out_of_order_max.total_seconds()))
            return self._emit(self._event(self._clock - back), "out_of_order")
        self._clock += timedelta(seconds=rng.expovariate(1.0 / c.mean_gap_seconds))
        return self._emit(self._event(self._clock), "valid")

    def records(self, count: int | None = None) -> Iterator[GeneratedRecord]:
        """``count`` records, or an endless stream when ``count`` is None."""
        i = 0
        while count is None or i < count:
            yield self.next_record()
            i += 1
