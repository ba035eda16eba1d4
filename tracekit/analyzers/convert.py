"""Result frames -> typed rows (:mod:`tracekit.results.rows`), once, at the end of an analysis."""

from __future__ import annotations

import functools
import gc
import keyword
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec
import msgspec.inspect as mi
import polars as pl

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

T = TypeVar("T")
#: Floats are kept to this many decimals (ns and percentages: far below what anyone reads).
DECIMALS = 4


def rows(df: pl.DataFrame, row_type: type[T]) -> list[T]:
    """Every row of ``df`` as a ``row_type`` Struct; columns it does not declare are dropped.

    NaN and infinities become None; categorical and enum columns become strings. The rows go
    through JSON (polars writes it, msgspec decodes the Structs): 2.5x as fast as Python dicts
    on the reduce's tables of a row per rank and step (300k rows: 0.5 -> 0.2 s); a frame with
    nested columns (whose floats are not cleaned) takes the dicts. A ``row_type`` of plain fields
    (:func:`_plain`) is made from the columns' values instead, where each column holds what its
    field takes (:func:`_constructed`): the same rows, without writing and parsing the text (the
    2.4M phase rows of the reduce of 1,024 copies of an A100 rank of a GB: 1.56 -> 1.24 s).
    """
    fields = set(getattr(row_type, "__struct_fields__", ()))
    cleaned = []
    for name, dtype in df.schema.items():
        if fields and name not in fields:
            continue
        col = pl.col(name)
        if dtype.is_float():
            col = pl.when(col.is_finite()).then(col.round(DECIMALS))
        elif isinstance(dtype, (pl.Categorical, pl.Enum)):
            col = col.cast(pl.String)
        cleaned.append(col.alias(name))
    frame = df.select(cleaned)
    with untracked():
        if any(dtype.is_nested() for dtype in frame.schema.values()):
            result: list[T] = msgspec.convert(frame.to_dicts(), list[row_type])  # type: ignore[valid-type]
        elif (made := _constructed(frame, row_type)) is not None:
            result = made
        else:
            result = msgspec.json.decode(frame.write_json(), type=list[row_type])  # type: ignore[valid-type]
    return result


#: The plain fields' types: what a column of each must hold (polars' dtype test).
_PLAIN: Final[dict[type, Callable[[pl.DataType], bool]]] = {
    mi.IntType: lambda d: d.is_integer(),
    mi.FloatType: lambda d: d.is_float() or d.is_integer(),
    mi.StrType: lambda d: d == pl.String,
    mi.BoolType: lambda d: d == pl.Boolean,
}
#: The constraints a plain field may declare, which the JSON decode checks and a constructor does not.
_CONSTRAINTS: Final = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern")


@functools.cache
def _plain(row_type: type) -> dict[str, tuple[type, bool, bool]] | None:
    """Each field of ``row_type`` -> its plain type (:data:`_PLAIN`), whether it may be None and
    whether it must be given; None where a field is of another type, declares a constraint, is
    renamed in JSON or is not a name a keyword argument can have."""
    info = mi.type_info(row_type)
    if not isinstance(info, mi.StructType):
        return None
    out = {}
    for f in info.fields:
        kind, optional = f.type, False
        if isinstance(kind, mi.UnionType):
            rest = [t for t in kind.types if not isinstance(t, mi.NoneType)]
            if len(rest) != 1 or len(kind.types) != 2:
                return None
            kind, optional = rest[0], True
        if type(kind) not in _PLAIN or any(getattr(kind, c, None) is not None for c in _CONSTRAINTS):
            return None
        if f.encode_name != f.name or not f.name.isidentifier() or keyword.iskeyword(f.name):
            return None
        out[f.name] = (type(kind), optional, f.required)
    return out


@functools.cache
def _maker(row_type: type, names: tuple[str, ...]) -> Callable[..., Any]:
    """A function of one value per name, in order, that makes a ``row_type`` of them (its
    fields are keywords only: a call with a dict per row took 2.4 times as long)."""
    args = ", ".join(f"_{i}" for i in range(len(names)))
    given = ", ".join(f"{n}=_{i}" for i, n in enumerate(names))
    made: Callable[..., Any] = eval(f"lambda {args}: T({given})", {"T": row_type})  # names checked by _plain
    return made


def _constructed(frame: pl.DataFrame, row_type: type[T]) -> list[T] | None:
    """``frame``'s rows made as ``row_type`` from its columns' values, as the JSON decode would
    give them; None where a column does not hold what its field takes (of another type, a null
    where None is not taken, a field that must be given left out): the decode says so."""
    made: type = row_type  # a class, whatever its rows' type
    plain = _plain(made)
    if plain is None or frame.width == 0:
        return None
    if any(required and name not in frame.columns for name, (_, _, required) in plain.items()):
        return None
    values = []
    for name in frame.columns:
        kind, optional, _ = plain[name]
        column = frame.get_column(name)
        if not _PLAIN[kind](column.dtype) or (column.null_count() and not optional):
            return None
        values.append((column.cast(pl.Float64) if kind is mi.FloatType else column).to_list())
    return list(map(_maker(made, tuple(frame.columns)), *values))


@contextmanager
def untracked() -> Iterator[None]:
    """The cyclic garbage collector paused while rows are made: hundreds of thousands of
    Structs and their maps, no cycle among them, each allocation counting towards a collection
    that walks every object of the process (at 1,024 ranks of 224 steps the ledger's 229k rows
    took 5.4-5.6 s of CPU with it running, 3.6-3.8 without). Running again as it was after."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
