"""What eventlake never prints: values of keys whose names look secret, credentials in
URLs, and values the config took from environment variables whose names look secret.
Every command's output, the status record, the dashboard and error messages pass
through :func:`mask_text` or :func:`masked`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "********"

#: A key or variable name that holds a secret: ``password``, ``secret.key``,
#: ``sasl.jaas.config``, ``api_token``, ``EVENTLAKE_METRICS_TOKEN``, ``fs.azure.sas...``.
_SECRET_NAME = re.compile(
    r"(pass(word|wd)?|secret|token|credential|private|jaas|api[._-]?key|access[._-]?key"
    r"|account[._-]?key|auth|signature|(^|[._-])sas([._-]|$)|(^|[._-])sig([._-]|$))",
    re.IGNORECASE,
)
#: ``scheme://user:password@host``: the password.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(?=@)")
#: ``?token=...&sig=...``: query values whose names look secret.
_QUERY_VALUE = re.compile(r"(?P<head>[?&;](?P<name>[^=&\s#]+)=)(?P<value>[^&\s#\"']*)")


def secret_name(name: str) -> bool:
    """Whether a key or variable called ``name`` holds a secret."""
    return bool(_SECRET_NAME.search(name))


def mask_text(text: str, values: Iterable[str] = ()) -> str:
    """``text`` with URL passwords, secret-looking query values and each of ``values``
    (at least 4 characters long) replaced by :data:`MASK`."""
    for value in sorted({v for v in values if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)

    def query(match: re.Match[str]) -> str:
        if secret_name(match.group("name")) and match.group("value"):
            return match.group("head") + MASK
        return match.group(0)

    return _QUERY_VALUE.sub(query, text)


def masked(data: Any, values: Iterable[str] = (), *, key: str = "") -> Any:
    """A copy of ``data`` (mappings, lists, scalars) with the value of every key whose
    name looks secret masked, and every string passed through :func:`mask_text`."""
    values = tuple(values)
    if isinstance(data, dict):
        return {k: masked(v, values, key=str(k)) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [masked(v, values, key=key) for v in data]
    if data is not None and key and secret_name(key) and not isinstance(data, bool):
        return MASK
    if isinstance(data, str):
        return mask_text(data, values)
    return data
