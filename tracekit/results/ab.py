"""``ab.json``: what ``tracekit capture --ab A B`` ran, as typed Structs.

Written with msgspec by :mod:`tracekit.capture.ab` into the A/B folder, beside ``a/`` and
``b/``. Folders are relative to the A/B folder (it may be moved). Layout of schema 1.x:

- ``config_path`` and ``common_overrides``: the config file and the command-line overrides
  both sides share;
- ``a`` and ``b``: each side's overrides as given on the command line (``text``), as parsed
  (``overrides``: key -> value text, applied after the common ones), and its capture folders
  in repeat order (``a`` when ``repeats`` is 1, else ``a/run1`` .. ``a/runN``);
- ``order``: every capture in the order it ran (A B A B ...), with when it started, how long
  it took and its mean step (ns, over every measured step of every rank).
"""

from __future__ import annotations

from typing import Final

import msgspec

from tracekit.results.records import load_record
from tracekit.results.vocab import SideKey  # noqa: TC001  (msgspec reads the annotations at run time)

__all__ = ["AB_SCHEMA", "AB_SCHEMA_VERSION", "ABCapture", "ABRun", "ABSide", "dump_ab", "load_ab"]

AB_SCHEMA: Final = "tracekit.ab_capture"
AB_SCHEMA_VERSION: Final = "1.0"


class ABSide(msgspec.Struct, kw_only=True, frozen=True):
    """One side of an A/B capture: its overrides and its capture folders."""

    text: str
    overrides: dict[str, str]
    folders: list[str]


class ABRun(msgspec.Struct, kw_only=True, frozen=True):
    """One capture of an A/B run."""

    side: SideKey
    repeat: int  # 1-based
    folder: str
    started: str  # ISO 8601, UTC
    seconds: float
    step_mean_ns: float | None = None


class ABCapture(msgspec.Struct, kw_only=True, frozen=True):
    """``ab.json``."""

    schema: str = AB_SCHEMA
    schema_version: str = AB_SCHEMA_VERSION
    config_path: str | None = None
    common_overrides: dict[str, str] = {}
    repeats: int
    a: ABSide
    b: ABSide
    order: list[ABRun]


def dump_ab(record: ABCapture) -> bytes:
    """``ab.json`` text: indented JSON and a final newline."""
    return msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"


def load_ab(data: bytes | str, *, source: str) -> ABCapture:
    """Parse ``ab.json``; anything else (another schema, a newer major version, a field of the
    wrong type) is an :class:`InputError` naming ``source``."""
    return load_record(data, ABCapture, what="tracekit A/B capture record", source=source)
