"""Save and load an :class:`~tracekit.results.analysis.Analysis` as JSON.

The file says what it is (``schema``) and which version (``schema_version``): a reader
refuses another schema, and a major version it does not know, with one line naming the file.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from tracekit.errors import InputError
from tracekit.results.analysis import SCHEMA, SCHEMA_VERSION, Analysis


class _Header(msgspec.Struct):
    schema: str | None = None
    schema_version: str | None = None


def dump_analysis(analysis: Analysis) -> str:
    """The analysis as indented JSON text (fields in schema order, ends with a newline)."""
    return msgspec.json.format(msgspec.json.encode(analysis), indent=2).decode() + "\n"


def decode_analysis(data: str | bytes, *, source: str) -> Analysis:
    """An analysis from JSON text; anything else is an :class:`InputError` naming ``source``."""
    try:
        header = msgspec.json.decode(data, type=_Header)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InputError(f"not a tracekit analysis ({exc})", path=source) from None
    if header.schema != SCHEMA:
        raise InputError(f'not a tracekit analysis (no "schema": "{SCHEMA}")', path=source)
    major = (header.schema_version or "").split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise InputError(
            f"analysis schema version {header.schema_version} is not readable by this tracekit "
            f"(it reads {SCHEMA_VERSION.split('.')[0]}.x; re-run tracekit analyze on the traces)",
            path=source,
        )
    try:
        return msgspec.json.decode(data, type=Analysis)
    except msgspec.ValidationError as exc:
        raise InputError(f"damaged tracekit analysis ({exc})", path=source) from None


def load_analysis(path: str | Path) -> Analysis:
    """Read a saved analysis (``tracekit analyze --json``) back into the typed object."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path) from None
    return decode_analysis(data, source=str(path))
