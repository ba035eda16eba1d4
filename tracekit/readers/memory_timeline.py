"""The categorized memory timeline that ``torch.profiler`` exports (``export_memory_timeline``,
raw form: ``*.raw.json.gz``), read into :data:`tracekit.model.counters.CATEGORY_SCHEMA`.

The file is one JSON list of ``[time, action, bytes, category]`` rows, one per change of one
tensor's memory on one device (``torch/profiler/_memory_profiler.py``):

* ``time``: -1 for memory that existed before profiling began; otherwise the profiler's
  clock, in microseconds (torch 2.1 and later convert) or nanoseconds (earlier): a value of
  10^17 or more is an epoch in nanoseconds, anything less is microseconds;
* ``action``: 1 preexisting, 2 create, 3 increment version (written twice, the old version's
  bytes negative, the new one's positive), 4 destroy (bytes negative);
* ``category``: the index of :data:`tracekit.model.counters.MEMORY_CATEGORIES`.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Final

import msgspec
import polars as pl

from tracekit.errors import InputError
from tracekit.model.counters import CATEGORY_SCHEMA, MEMORY_CATEGORIES
from tracekit.model.input_warnings import InputWarning

#: File names of raw memory timelines (``export_memory_timeline("x.raw.json.gz")``, and the
#: ``.raw.gz`` of HTA's fixtures); never read as traces.
NAME: Final = re.compile(r"(?i)\.raw(?:\.json)?(?:\.gz)?$")
#: A time at or above this is an epoch in nanoseconds; below, microseconds.
NS_EPOCH: Final = 10**17
ACTIONS: Final = (1, 2, 3, 4)

_ROWS: Final = msgspec.json.Decoder(list[tuple[int, int, int, int]])


def is_memory_timeline(path: Path) -> bool:
    """Whether ``path`` is named like a raw memory timeline."""
    return bool(NAME.search(path.name))


def read_memory_timeline(path: str | Path, *, rank: int) -> pl.DataFrame:
    """The rows of one raw memory timeline, as ``rank``'s categorized timeline (see
    :func:`read_memory_timeline_checked`, whose warnings this drops)."""
    return read_memory_timeline_checked(path, rank=rank)[0]


def read_memory_timeline_checked(path: str | Path, *, rank: int) -> tuple[pl.DataFrame, tuple[InputWarning, ...]]:
    """The rows of one raw memory timeline, as ``rank``'s categorized timeline, in time order, and
    what was wrong with them.

    A category whose frees exceed what the timeline saw allocated before them (running below
    zero: the memory was allocated before the timeline began, and not recorded as there) gets
    that much memory as existing before profiling, and a ``bad_memory`` warning (key ``frees``)
    counts the categories. Raises :class:`InputError` naming the file when it is not one (not
    JSON, not a list of four integers per row, a value beyond 64 bits, an action or category
    outside torch's enums).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path) from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise InputError(f"damaged gzip ({exc})", path=path) from None
    try:
        rows = _ROWS.decode(data)
    except msgspec.DecodeError as exc:
        raise InputError(
            f"not a raw memory timeline (a JSON list of [time, action, bytes, category] rows: {exc})", path=path
        ) from None
    if not rows:
        return pl.DataFrame(schema=CATEGORY_SCHEMA), ()
    times, actions, sizes, categories = (list(c) for c in zip(*rows, strict=True))
    huge = next((x for x in (*times, *sizes) if not -(2**63) <= x < 2**63), None)
    if huge is not None:
        shown = str(huge) if len(str(huge)) <= 24 else f"{str(huge)[:20]}... ({len(str(huge))} digits)"
        raise InputError(f"not a raw memory timeline: a row holds {shown}, beyond 64 bits", path=path)
    bad = next((a for a in actions if a not in ACTIONS), None)
    if bad is not None:
        raise InputError(f"not a raw memory timeline: action {bad} is none of torch's (1-4)", path=path)
    bad = next((c for c in categories if not 0 <= c < len(MEMORY_CATEGORIES)), None)
    if bad is not None:
        raise InputError(f"not a raw memory timeline: category {bad} is none of torch's (0-7)", path=path)
    frame = pl.DataFrame(
        {"time": times, "action": actions, "bytes": sizes, "index": categories},
        schema={"time": pl.Int64, "action": pl.Int8, "bytes": pl.Int64, "index": pl.UInt8},
    )
    time = pl.col("time")
    timeline = frame.select(
        pl.lit(rank, dtype=pl.Int32).alias("rank"),
        pl.when(time < 0).then(None).when(time >= NS_EPOCH).then(time).otherwise(time * 1000).alias("time_ns"),
        "action",
        pl.col("index")
        .replace_strict(dict(enumerate(MEMORY_CATEGORIES)), return_dtype=CATEGORY_SCHEMA["category"])
        .alias("category"),
        "bytes",
    ).sort("time_ns", nulls_last=False, maintain_order=True)  # rows out of order would move the peak
    deficit = (
        timeline.select("category", low=pl.col("bytes").cum_sum().over("category"))
        .group_by("category")
        .agg(pl.col("low").min())
        .filter(pl.col("low") < 0)
        .sort("category")
    )
    if deficit.height == 0:
        return timeline, ()
    before = deficit.select(
        pl.lit(rank, dtype=pl.Int32).alias("rank"),
        pl.lit(None, dtype=pl.Int64).alias("time_ns"),
        pl.lit(1, dtype=pl.Int8).alias("action"),
        "category",
        (-pl.col("low")).alias("bytes"),
    )
    return pl.concat([before, timeline]), (InputWarning(kind="bad_memory", key="frees", count=deficit.height),)
