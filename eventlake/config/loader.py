"""Load settings from YAML, apply overrides and environment, translate validation errors."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from eventlake.config.model import Settings
from eventlake.errors import ErrorCode, EventlakeError
from eventlake.secrets import secret_name

DEFAULT_CONFIG = Path("eventlake.yaml")
# Maps whose keys themselves contain dots: `--set spark.conf.spark.sql.x=1` sets key
# "spark.sql.x" of spark.conf.
_DOTTED_KEY_MAPS = {("spark", "conf")}
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand_env(value: Any, key: str, secrets: list[str]) -> Any:
    """``value`` with each ``${VAR}`` replaced; what a variable whose name looks secret
    gave is added to ``secrets``."""
    if isinstance(value, dict):
        return {k: _expand_env(v, f"{key}.{k}" if key else str(k), secrets)
                for k, v in value.items()}  # fmt: skip
    if isinstance(value, list):
        return [_expand_env(v, key, secrets) for v in value]
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            if secret_name(name):
                secrets.append(os.environ[name])
            return os.environ[name]
        if default is not None:
            return default
        raise EventlakeError(
            ErrorCode.CONFIG_MISSING_ENV,
            f"config key '{key}' refers to environment variable {name}, which is not set.",
            expected=f"{name} in the environment (or a default: ${{{name}:-value}})",
            fix=f"export {name}=... before running eventlake",
        )

    return _ENV_REF.sub(sub, value)


def apply_override(data: dict[str, Any], override: str) -> None:
    """Apply one ``dotted.key=value`` override in place; the value is parsed as YAML."""
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise EventlakeError(
            ErrorCode.CONFIG_BAD_OVERRIDE,
            f"override '{override}' is not of the form dotted.key=value.",
            expected="for example --set kafka.bootstrap_servers=127.0.0.1:9092",
            fix="write the key, an '=' and the value",
        )
    parts = key.strip().split(".")
    for prefix in _DOTTED_KEY_MAPS:
        n = len(prefix)
        if tuple(parts[:n]) == prefix and len(parts) > n:
            parts = [*prefix, ".".join(parts[n:])]
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise EventlakeError(
                ErrorCode.CONFIG_BAD_OVERRIDE,
                f"override '{key}' descends into '{part}', which holds a value, not a section.",
                fix="override the section's own key instead",
            )
        node = child
    node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else ""


def _describe(errors: Iterable[Mapping[str, Any]]) -> tuple[ErrorCode, str]:
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        keys = ", ".join(".".join(str(p) for p in e["loc"]) for e in unknown)
        return ErrorCode.CONFIG_UNKNOWN_KEY, f"unknown config key(s): {keys}"
    msgs = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors)
    return ErrorCode.CONFIG_INVALID_VALUE, f"invalid config value(s): {msgs}"


def settings_from_dict(data: Mapping[str, Any], *, source: str = "config") -> Settings:
    """Validate a plain mapping into Settings, with actionable errors."""
    secrets: list[str] = []
    try:
        settings = Settings.model_validate(_expand_env(dict(data), "", secrets))
    except ValidationError as exc:
        code, what = _describe(exc.errors())
        raise EventlakeError(
            code,
            f"{what} (in {source}).",
            expected="only the keys documented in README.md, section Configuration",
            fix="correct or remove the key; `eventlake config show` prints the effective config",
        ) from None
    return settings.with_secret_env(tuple(secrets))


def load_settings(path: Path | None = None, overrides: Iterable[str] = ()) -> Settings:
    """Read ``path`` (or ./eventlake.yaml when present, else defaults) and apply overrides."""
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None and not path.is_file():
        raise EventlakeError(
            ErrorCode.CONFIG_NOT_FOUND,
            f"config file {path} does not exist.",
        )
    chosen = path if path is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None)
    if chosen is not None:
        source = str(chosen)
        try:
            loaded = yaml.safe_load(chosen.read_text()) or {}
        except yaml.YAMLError as exc:
            raise EventlakeError(
                ErrorCode.CONFIG_INVALID_YAML,
                f"{chosen} is not valid YAML: {exc}",
                fix="fix the YAML syntax at the position shown",
            ) from None
        if not isinstance(loaded, dict):
            raise EventlakeError(
                ErrorCode.CONFIG_INVALID_YAML,
                f"{chosen} holds a {type(loaded).__name__}, not a mapping of sections.",
                expected="top-level keys such as kafka:, lake:, spark:",
                fix="start the file with sections, e.g. 'kafka:' on its own line",
            )
        data = loaded
    for override in overrides:
        apply_override(data, override)
    settings = settings_from_dict(data, source=source)
    return settings.with_base_dir(chosen.parent if chosen is not None else Path.cwd())
