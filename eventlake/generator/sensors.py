"""Sensor readings: ``sensor_id``, ``temperature``, ``event_time``; each sensor's
temperature follows its own random walk."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlake.generator.events import EventStream, EventStreamConfig, iso


@dataclass(frozen=True)
class SensorsConfig(EventStreamConfig):
    mean_gap_seconds: float = 5.0
    sensors: int = 8


class SensorsGenerator(EventStream):
    key_field = "sensor_id"
    required_fields = ("sensor_id", "event_time")
    bad_values = {  # noqa: RUF012
        "event_time": ("yesterday", "2026-13-45T99:00:00Z", ""),
        "temperature": ("hot", "n/a", {"c": 20}),
    }

    def __init__(self, config: SensorsConfig | None = None) -> None:
        self.config: SensorsConfig = config or SensorsConfig()
        super().__init__(self.config)
        self._temperature = {f"s{i:02d}": 20.0 + i for i in range(1, self.config.sensors + 1)}

    def _event(self, event_time: datetime) -> dict[str, Any]:
        rng = self._rng
        sensor = rng.choice(sorted(self._temperature))
        self._temperature[sensor] += rng.gauss(0, 0.5)
        return {
            "sensor_id": sensor,
            "temperature": round(self._temperature[sensor], 2),
            "event_time": iso(event_time),
        }
