"""What the root command hands to subcommands: where config comes from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eventlake.config import Settings, load_settings


@dataclass
class CliState:
    config_path: Path | None = None
    overrides: tuple[str, ...] = ()
    _settings: Settings | None = field(default=None, repr=False)

    def secret_values(self) -> tuple[str, ...]:
        """What no output may show, as far as the config was read (none before)."""
        return self._settings.secret_values if self._settings is not None else ()

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_path, self.overrides)
        return self._settings
