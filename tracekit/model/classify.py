"""Classification of events into compute / collective / memory / sync / other.

Two steps, so that a kernel is a collective in exactly one place:

* :func:`category_expr`, one polars expression over ``kind`` and ``name``, matches the names of
  the communication taxonomy (:mod:`tracekit.model.taxonomy`): kernels of NCCL/RCCL/MSCCL,
  DeepEP and its vendors' expert-parallel all-to-all, MORI, NVSHMEM, PyTorch SymmetricMemory,
  custom all-reduce, TransformerEngine userbuffers, HCCL/oneCCL; and host events of c10d, its
  backends (``gloo:all_reduce``...), SymmetricMemory, DeepEP and pplx-kernels. Readers apply it
  to each file (and the cache keeps the result).
* :func:`classify_run` runs once on every rank's events together and adds what names alone
  miss (see :mod:`tracekit.model.comm_evidence`): the user's kernel patterns, kernels launched
  from inside a communication host op, kernels whose names read as all-to-all on a stream mostly
  used for communication, and kernels without a recorded launch on a stream that carries only
  communication. It only ever turns compute kernels into collectives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.model.by_kind import ROW, ByKind
from tracekit.model.comm_evidence import (
    KERNEL_COLUMNS,
    frame_select,
    hinted_on_comm_streams,
    kernels_of,
    launched_in_comm,
    unlaunched_on_comm_streams,
    user_kernel_pattern,
)
from tracekit.model.schema import Category
from tracekit.model.taxonomy import (
    COMM_HOST_PATTERN,
    COMM_KERNEL_PATTERN,
    HOST_KINDS,
    NOT_COMM_KERNEL_PATTERN,
    is_comm_host_name,
    is_comm_kernel_name,
    is_ep_hint_name,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.model.comm_evidence import Select

__all__ = [
    "COLLECTIVE_HOST_PATTERN",
    "COLLECTIVE_KERNEL_PATTERN",
    "category_expr",
    "category_of",
    "classify",
    "classify_held",
    "classify_run",
    "with_category",
]

#: GPU kernels that are communication by name (every kernel family of the taxonomy).
COLLECTIVE_KERNEL_PATTERN: Final = COMM_KERNEL_PATTERN
#: Host-side communication: operators, ranges and Python frames.
COLLECTIVE_HOST_PATTERN: Final = COMM_HOST_PATTERN


def category_expr(*, comm_kernels: pl.Series | None = None, comm_host: pl.Series | None = None) -> pl.Expr:
    """The ``category`` of every event, from ``kind`` and ``name`` (names only).

    ``comm_kernels`` / ``comm_host``: the names that the taxonomy makes communication, when
    they are known (:func:`with_category` finds them once per distinct name); else the
    patterns are matched on every event's name.
    """
    kind = pl.col("kind")
    name = pl.col("name").cast(pl.String)
    is_comm_kernel = is_comm_kernel_name(name) if comm_kernels is None else pl.col("name").is_in(comm_kernels.implode())
    is_comm_host = is_comm_host_name(name) if comm_host is None else pl.col("name").is_in(comm_host.implode())
    return (
        pl.when(kind == "kernel")
        .then(pl.when(is_comm_kernel).then(pl.lit("collective")).otherwise(pl.lit("compute")))
        .when(kind.is_in(["memcpy", "memset"]))
        .then(pl.lit("memory"))
        .when(kind == "sync")
        .then(pl.lit("sync"))
        .when(kind.is_in(list(HOST_KINDS)) & is_comm_host)
        .then(pl.lit("collective"))
        .otherwise(pl.lit("other"))
        .cast(Category)
        .alias("category")
    )


def with_category(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with its ``category`` column (re)computed from ``kind`` and ``name``, the
    taxonomy's patterns matched once per distinct name (a few hundred) rather than once per
    event (millions)."""
    return events.with_columns(category_of(events.get_column("name")))


def category_of(names: pl.Series) -> pl.Expr:
    """:func:`category_expr` for events whose names are among ``names`` (any number of each),
    the taxonomy's patterns matched once per distinct name: for a query to compute with its
    other columns (an eager frame's new column aligns, and so copies, its every chunked column)."""
    distinct = names.unique().drop_nulls()
    text = distinct.cast(pl.String)
    return category_expr(
        comm_kernels=distinct.filter(_matches(text, kernel=True)),
        comm_host=distinct.filter(_matches(text, kernel=False)),
    )


def _matches(text: pl.Series, *, kernel: bool) -> pl.Series:
    """Which of the names ``text`` the taxonomy makes communication (kernels, or host events)."""
    name = pl.col("name")
    test = is_comm_kernel_name(name) if kernel else is_comm_host_name(name)
    return text.to_frame("name").select(test).to_series()


def classify(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with its ``category`` column (re)computed from names."""
    return with_category(events)


def classify_run(events: pl.DataFrame, *, comm_kernels: Sequence[str] = ()) -> pl.DataFrame:
    """Every rank's events (classified by name) with communication found beyond names.

    A compute kernel becomes a collective when its name matches one of ``comm_kernels``
    (regular expressions; an invalid one raises :class:`~tracekit.errors.InputError`), when
    it was launched from inside a communication host op, when its name reads as all-to-all
    and it runs on a stream mostly used for communication, or when it has no recorded launch
    and runs on a stream whose launched kernels are all collectives. Kernels that only
    compute a layout (:data:`~tracekit.model.taxonomy.NOT_COMM_KERNEL_PATTERN`) stay compute
    unless a user pattern names them. Rows and their order are unchanged.
    """
    rows = _promoted(frame_select(events), lambda: kernels_of(events), comm_kernels)
    if rows.len() == 0:
        return events
    category = events.get_column("category").clone().scatter(rows, "collective")
    return events.with_columns(category)


def classify_held(held: ByKind, *, comm_kernels: Sequence[str] = ()) -> ByKind:
    """:func:`classify_run` of the events ``held`` a kind at a time: the same kernels made
    collectives, each kind read alone (every event in one frame, 5.4M on a 2 GB rank, held
    beside the kinds' parts while they are made, was the read's peak)."""
    part = held.parts.get("kernel")

    def kernels() -> pl.DataFrame:
        if part is None:
            return pl.DataFrame(schema={ROW: pl.get_index_type(), **{c: held.schema[c] for c in KERNEL_COLUMNS}})
        return held.lazy("kernel").select(ROW, *KERNEL_COLUMNS).collect()

    rows = _promoted(held.select, kernels, comm_kernels)
    if part is None or rows.len() == 0:
        return held
    return ByKind({**held.parts, "kernel": _promote(part, rows)}, held.height, held.schema)


def _promoted(select: Select, kernels_read: Callable[[], pl.DataFrame], comm_kernels: Sequence[str]) -> pl.Series:
    """The places (``_row``) of the kernels :func:`classify_run` makes collectives, of the
    events read through ``select`` and their kernels (``kernels_read``: read once the user's
    patterns are found valid)."""
    user = user_kernel_pattern(comm_kernels)
    kernels = kernels_read()
    if kernels.is_empty():
        return pl.Series(ROW, [], dtype=pl.get_index_type())
    kernels = kernels.with_columns(_named=pl.col("category"))
    names = kernels.get_column("name").unique().cast(pl.String).drop_nulls()
    compute = pl.col("category") == "compute"
    if user is not None:
        named = names.filter(names.str.contains(user)).implode()
        kernels = _promote(kernels, kernels.filter(compute, pl.col("name").is_in(named)).get_column(ROW))
    excluded = names.filter(names.str.contains(NOT_COMM_KERNEL_PATTERN)).implode()
    # each rule's candidates are the columns it reads of them alone, filtered (a 2 GB rank's 0.6M
    # kernels were filtered whole, names and times, three times over)
    plain = kernels.lazy().filter(compute, ~pl.col("name").is_in(excluded))
    candidates = plain.select(ROW, "rank", "correlation").collect()
    kernels = _promote(kernels, launched_in_comm(select, candidates))
    hinted = names.filter(names.to_frame("name").select(is_ep_hint_name(pl.col("name"))).to_series()).implode()
    plain = kernels.lazy().filter(compute, ~pl.col("name").is_in(excluded), pl.col("name").is_in(hinted))
    candidates = plain.select(ROW, "rank", "device", "stream").collect()
    kernels = _promote(kernels, hinted_on_comm_streams(kernels, hinted=candidates))
    candidates = kernels.lazy().filter(compute, ~pl.col("name").is_in(excluded)).select(ROW).collect()
    kernels = _promote(kernels, unlaunched_on_comm_streams(select, kernels, candidates=candidates))
    rows: pl.Series = kernels.filter(pl.col("category") != pl.col("_named")).get_column(ROW)
    return rows


def _promote(kernels: pl.DataFrame, rows: pl.Series) -> pl.DataFrame:
    """``kernels`` (with their places, ``_row``) with the kernels at these ``rows`` made
    collectives: the candidates of each rule, and the kernel part of a run held by kind."""
    if rows.len() == 0:
        return kernels
    hit = pl.col(ROW).is_in(rows.implode())
    return kernels.with_columns(
        pl.when(hit).then(pl.lit("collective", dtype=Category)).otherwise("category").alias("category")
    )
