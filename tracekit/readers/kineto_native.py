"""Kineto events -> raw columns in native code, where the extension was built.

``_kineto_columns.c`` reads a chunk of events (a JSON array) in one pass and writes the
columns of :func:`~tracekit.readers.kineto_decode.raw_frames` straight into arrays, with no
Python object per event: about a third of the time msgspec's typed decode and the columns
built from its structs take. It accepts only what the
typed msgspec decoder accepts and gives what it gives; on anything else (a value of another
type, a key written with an escape, a duplicate key, malformed JSON...) it declines, and the
chunk is decoded by msgspec, which decides. So the two paths give the same frames, and tests
hold them to it (``tests/readers/test_kineto_native.py``).

The extension is optional: an install that could not compile it (no C compiler) reads every
chunk with msgspec, as does ``TRACEKIT_NATIVE=0``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import polars as pl

from tracekit.errors import TraceReadError
from tracekit.native import wanted
from tracekit.readers.kineto_decode import ARG_COLUMNS, EVENT_COLUMNS, MEMORY_COLUMNS
from tracekit.readers.kineto_normalize import MAX_NAME_BYTES, category_facts, name_facts

if TYPE_CHECKING:
    import mmap
    from types import ModuleType

    #: What the decoder reads: JSON text in memory.
    Text = bytes | bytearray | memoryview | mmap.mmap

_native: ModuleType | None
try:
    from tracekit.readers import _kineto_columns as _native
except ImportError:  # not compiled: msgspec reads every chunk
    _native = None

#: Whether chunks are decoded natively: the extension is there and not turned off.
ENABLED: Final = _native is not None and wanted()

_STRINGS: Final = ("cat", "name", "coll_name", "pg_name")
#: The string columns kept per event (the category is read only through its facts).
_CATEGORICAL: Final = ("name", "coll_name", "pg_name")
_FLOATS: Final = ("ts", "dur")
_INTS: Final = ("pid", "tid", *(c for c, t in ARG_COLUMNS.items() if t == pl.Int64()), "threads")
_ORDER: Final = ("instant", *(c for c in EVENT_COLUMNS if c != "cat"), *ARG_COLUMNS, "threads")


def native_frames(text: Text) -> tuple[pl.DataFrame, pl.DataFrame | None] | None:
    """What :func:`~tracekit.readers.kineto_decode.raw_frames` makes of the events in ``text``
    (a JSON array), decoded natively, with the names categorical and, for the category, what it
    decides (:data:`~tracekit.readers.kineto_normalize.CATEGORY_FACTS`), and what each name
    decides (:data:`~tracekit.readers.kineto_normalize.NAME_FACTS`) besides; None where the
    native decoder declines (or is off)."""
    return _decode(text) if ENABLED else None


def native_prefix(text: Text) -> tuple[tuple[pl.DataFrame, pl.DataFrame | None], int] | None:
    """:func:`native_frames` of the JSON array that ``text`` starts with, whatever follows it,
    and the bytes of ``text`` up to the array's ``]`` (included); None where the native decoder
    declines (or is off)."""
    if not ENABLED or _native is None:
        return None
    out = _call(text, prefix=True)
    if out is None:
        return None
    columns, read = out
    return _frames(columns), read


def _call(text: Text, *, prefix: bool = False) -> Any:
    """The extension's decode of ``text`` (the extension must be there)."""
    assert _native is not None
    try:
        return _native.decode(text, prefix)
    except ValueError as exc:  # a string over the decoder's limit: refused before it is copied
        size = int(str(exc).split()[2])
        raise TraceReadError(
            f"an event holds a string of {size / 2**20:.0f} MiB; no profiler writes one over "
            f"{MAX_NAME_BYTES >> 20} MiB: not a trace tracekit reads"
        ) from None


def _decode(text: Text) -> tuple[pl.DataFrame, pl.DataFrame | None] | None:
    """:func:`native_frames` whether or not turned off (the extension must be there)."""
    if _native is None:
        return None
    out = _call(text)
    return None if out is None else _frames(out)


def _frames(out: Any) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The frames of what the extension's decode gave."""
    n, instant, uniques, codes, floats, ints, (m, mem_ts, mem_ints) = out
    strings = pl.Series(uniques, dtype=pl.String)  # uniques[0] is None: code 0 is no value
    # the names categorical from the start: each distinct string hashed once, and no string
    # per event (the categories' and names' facts below are all that reads them)
    categorical = strings.cast(pl.Categorical)
    by_code = dict(zip(_STRINGS, codes, strict=True))
    columns = {"instant": owned(pl.Series("instant", np.frombuffer(instant, dtype=np.bool_)))}
    columns |= {name: categorical[_codes(by_code[name])].alias(name) for name in _CATEGORICAL}
    columns |= {name: _column(name, pair, np.float64) for name, pair in zip(_FLOATS, floats, strict=True)}
    columns |= {name: _column(name, pair, np.int64) for name, pair in zip(_INTS, ints, strict=True)}
    # what each category and each name decides, worked out once per distinct string (one query),
    # not once per event; each event's then read by its code (indexing a series: no query)
    by_category, by_name = _facts()
    decided = strings.to_frame("s").select(**by_category, **by_name)
    cat, name_codes = _codes(by_code["cat"]), _codes(by_code["name"])
    facts = [decided.get_column(c)[cat] for c in by_category] + [decided.get_column(c)[name_codes] for c in by_name]
    frame = pl.DataFrame([*(columns[c] for c in _ORDER), *facts])
    assert frame.height == n
    if not m:
        return frame, None
    memory = pl.DataFrame(
        [
            _column("ts", mem_ts, np.float64),
            *(_column(name, pair, np.int64) for name, pair in zip(MEMORY_COLUMNS, mem_ints, strict=True)),
        ]
    )
    return frame, memory


@functools.cache
def _facts() -> tuple[dict[str, pl.Expr], dict[str, pl.Expr]]:
    """What a category and what a name decide, as expressions of the column ``s``: built once
    (the category's took 0.3 ms, once per chunk)."""
    return category_facts(pl.col("s")), name_facts(pl.col("s"))


def _codes(codes: bytes) -> pl.Series:
    return pl.Series(np.frombuffer(codes, dtype=np.uint32))


def _column(name: str, pair: tuple[bytes, bytes | None], dtype: Any) -> pl.Series:
    """A column from its values and their validity (None: every value is there), in memory
    of polars' own (:func:`owned`)."""
    values, valid = pair
    series = owned(pl.Series(name, np.frombuffer(values, dtype=dtype)))
    if valid is None:
        return series
    return series.set(pl.Series(np.frombuffer(valid, dtype=np.bool_)).not_(), None)


def owned(series: pl.Series) -> pl.Series:
    """``series`` copied into memory of polars' own allocator.

    Polars takes a NumPy array's memory as it is, and a column that no step copies (a
    chunk with no event filtered out) would then keep the decoder's buffer, from the C
    heap, alive in the rank's frames: its freed neighbours there are never given back
    (one 2 GB rank held 0.3 GB more). Extending an empty series copies.
    """
    copy: pl.Series = pl.Series(series.name, dtype=series.dtype).extend(series)
    return copy
