"""Reading and writing the small versioned records of the tools (``dataloader.json``, a
parameter audit, ``ab.json``): a ``schema`` name and a ``schema_version`` whose major number
must match this tracekit's, both the defaults of the record's Struct."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from tracekit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["dump_record", "load_record", "older_minor"]

S = TypeVar("S", bound=msgspec.Struct)


def dump_record(record: msgspec.Struct) -> bytes:
    """A record as indented JSON with a final newline."""
    return msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"


def older_minor(found: object, current: str) -> bool:
    """Whether the version ``found`` in a file (``"1.3"``) is an older minor version of ``current``'s major."""
    if not isinstance(found, str):
        return False
    major, _, minor = found.partition(".")
    ours, _, our_minor = current.partition(".")
    minor, our_minor = minor.split(".")[0], our_minor.split(".")[0]
    return major == ours and minor.isdigit() and our_minor.isdigit() and int(minor) < int(our_minor)


def load_record(
    data: bytes | str,
    kind: type[S],
    *,
    what: str,
    source: str,
    upgrade: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> S:
    """Parse a record of ``kind`` (``what``: its name, "tracekit dataloader probe"); another
    schema, a newer major version, bad JSON or a field of the wrong type is an
    :class:`InputError` naming ``source``. ``upgrade``: turns the decoded JSON of an older
    minor version into the current layout, whose version it then holds."""
    defaults = {f.name: f.default for f in msgspec.structs.fields(kind)}
    schema, version = str(defaults["schema"]), str(defaults["schema_version"])
    try:
        decoded = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InputError(f"not valid JSON ({exc})", path=source) from None
    if not isinstance(decoded, dict) or decoded.get("schema") != schema:
        raise InputError(f'not a {what} (no "schema": "{schema}")', path=source)
    found = decoded.get("schema_version")
    if not isinstance(found, str) or found.split(".")[0] != version.split(".", maxsplit=1)[0]:
        raise InputError(f"{what} schema version {found} is not readable by this tracekit", path=source)
    if upgrade is not None and older_minor(found, version):
        decoded = {**upgrade(decoded), "schema_version": version}
    try:
        return msgspec.convert(decoded, kind)
    except msgspec.ValidationError as exc:
        raise InputError(f"not a valid {what} ({exc})", path=source) from None
