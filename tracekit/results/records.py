"""Reading a versioned tracekit record (``ab.json``, ``sweep.json``, a sweep matrix): one rule
for the ``schema`` header, the major version, and the fields' types."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from tracekit.errors import InputError

__all__ = ["load_record"]

T = TypeVar("T", bound=msgspec.Struct)


def load_record(data: bytes | str, kind: type[T], *, schema: str, version: str, what: str, source: str) -> T:
    """Parse ``data`` as a ``kind`` record; anything else (another schema, a newer major
    version than ``version``'s, a field of the wrong type) is an :class:`InputError` naming
    ``source`` and saying ``what`` was expected ("A/B capture record")."""
    try:
        decoded = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InputError(f"not valid JSON ({exc})", path=source) from None
    if not isinstance(decoded, dict) or decoded.get("schema") != schema:
        raise InputError(f'not a tracekit {what} (no "schema": "{schema}")', path=source)
    found = decoded.get("schema_version")
    if not isinstance(found, str) or found.split(".")[0] != version.split(".", maxsplit=1)[0]:
        raise InputError(f"{what} schema version {found} is not readable by this tracekit", path=source)
    try:
        return msgspec.convert(decoded, kind)
    except msgspec.ValidationError as exc:
        raise InputError(f"not a valid {what} ({exc})", path=source) from None
