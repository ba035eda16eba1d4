"""The Python API's arguments, checked where they enter: the values the CLI refuses, refused
alike, in one line naming the argument.

A ``str`` where a list is taken would be iterated character by character (``load_run("run")``
reading the files ``r``, ``u``, ``n``; ``comm_kernels="^nccl"`` making ``^`` a pattern that
matches every kernel), so it is refused, with the call to write instead; a number that is NaN, or
outside its range, is refused before it can switch a check off (``Noise(threshold_pct=nan)``
would let every change through a CI gate).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path

from tracekit.errors import InputError

__all__ = ["number", "path_list", "text_list"]


def path_list(value: object, *, name: str) -> list[Path]:
    """``value`` (an iterable of paths) as a list of :class:`Path`; a single path, a non-iterable,
    an element that is not a path, or none at all is refused naming ``name``."""
    if isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{name}: a list of paths, not a single {type(value).__name__}: write [{_short(value)}]")
    if not isinstance(value, Iterable):
        raise TypeError(f"{name}: a list of paths, not {_a(value)}")
    paths = list(value)
    for item in paths:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"{name}: each path is a str or a Path, not {_a(item)}")
    if not paths:
        raise InputError(f"{name}: no paths given (at least one trace file or folder)")
    return [Path(p) for p in paths]


def text_list(value: object, *, name: str) -> tuple[str, ...]:
    """``value`` (an iterable of str) as a tuple; a single str or an element that is not a str is
    refused naming ``name``."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name}: a list of str, not a single {type(value).__name__}: write [{_short(value)}]")
    if not isinstance(value, Iterable):
        raise TypeError(f"{name}: a list of str, not {_a(value)}")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{name}: each item is a str, not {_a(item)}")
    return items


def number(
    value: object,
    *,
    name: str,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
) -> float:
    """``value`` as a number within ``[low, high]`` (an end ``*_open``: excluded); a bool, a
    non-number, NaN, an infinity or a value outside the range is refused naming ``name``."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{name}: {'an integer' if integer else 'a number'}, not {_a(value)}")
    x = float(value) if not integer else value
    if not math.isfinite(x):
        raise InputError(f"{name}: must be a finite number, got {value!r}")
    below = low is not None and (x <= low if low_open else x < low)
    above = high is not None and (x >= high if high_open else x > high)
    if below or above:
        raise InputError(f"{name}: must be {_range(low, high, low_open, high_open)}, got {value!r}")
    return x


def _range(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'above' if low_open else 'at least'} {_shown(low)}")
    if high is not None:
        parts.append(f"{'below' if high_open else 'at most'} {_shown(high)}")
    return " and ".join(parts)


def _shown(x: float) -> str:
    """A bound as written: ``2,147,483,647``, ``0.999``."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _a(value: object) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def _short(value: str | bytes | os.PathLike[str]) -> str:
    text = repr(os.fspath(value) if isinstance(value, os.PathLike) else value)
    return text if len(text) <= 60 else text[:59] + "…"
