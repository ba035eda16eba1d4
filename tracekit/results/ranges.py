"""Range checks of loaded records: every number finite, and sizes, times and counts not negative.

A record that decodes (the right types) may still hold numbers no run can produce: a negative
peak RSS, a NaN mean, a step time of ``Infinity``. Such a record would pass gates it should not
(a memory gate on a negative peak), so loading it is an :class:`~tracekit.errors.InputError`
naming the file and the field (``per_rank[0].memory.peak_rss_bytes``).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import msgspec

from tracekit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["check_ranges", "explain_non_finite"]

#: Field names whose values may be negative: changes and differences (memory deltas, lateness).
_SIGNED = ("delta", "change", "lateness", "offset")


def _numbers(value: object, path: str) -> Iterator[tuple[str, float]]:
    """Every number under ``value`` (Structs, lists), with its path; free-form dicts are skipped."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            yield from _numbers(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _numbers(item, f"{path}[{i}]")


def _leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1].split("[", 1)[0]


def check_ranges(record: msgspec.Struct, *, source: str) -> None:
    """Raise an :class:`InputError` naming ``source`` and the field of ``record`` that is not
    finite, or negative where it is a size, a time, a rate or a count."""
    for path, number in _numbers(record, ""):
        if not math.isfinite(number):
            raise InputError(f"field {path} is {number}, not a finite number", path=source)
        if number < 0 and not any(word in _leaf(path) for word in _SIGNED):
            raise InputError(f"field {path} is {number}: it cannot be negative", path=source)


def _non_finite(value: object, path: str) -> str | None:
    if isinstance(value, float) and not math.isfinite(value):
        return f"field {path} is {value}, not a finite number"
    items: Any = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _non_finite(
            item, f"{path}.{key}" if isinstance(key, str) and path else f"{path}[{key}]" if path else str(key)
        )
        if found is not None:
            return found
    return None


def explain_non_finite(data: bytes | str) -> str | None:
    """Why strict JSON that Python's lenient reader accepts was refused: the first field holding
    ``NaN`` or ``Infinity`` (``field throughput.steps_per_s is nan, not a finite number``)."""
    try:
        decoded = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return _non_finite(decoded, "")
