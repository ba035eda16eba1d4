"""The one event schema that every reader produces and every analyzer reads.

Times are integer nanoseconds on one clock per run. A row is one interval (or an instant,
``start_ns == end_ns``) on one rank. CPU-side rows have a null ``device``; GPU-side rows
(kernels, copies, sets, GPU syncs and GPU annotations) have the device and stream.
"""

from __future__ import annotations

import functools
from typing import Final

import polars as pl

#: What an event is, independent of the file format it came from.
KINDS: Final = (
    "cpu_op",  # an operator on the host (aten::mm, c10d::allreduce_, ...)
    "annotation",  # a user range on the host (record_function, NVTX push/pop)
    "step",  # a profiler step range on the host (ProfilerStep#N)
    "python",  # a Python function frame
    "runtime",  # a CUDA/HIP runtime call (cudaLaunchKernel, cudaMemcpyAsync, ...)
    "driver",  # a CUDA driver call (cuLaunchKernel, ...)
    "kernel",  # a GPU kernel
    "memcpy",  # a GPU copy
    "memset",  # a GPU memset
    "sync",  # a GPU-side synchronization (cuda_sync: stream/event/context waits)
    "gpu_annotation",  # a user range projected onto the GPU timeline
    "instant",  # an instant event
    "other",  # anything else worth keeping
)
Kind = pl.Enum(list(KINDS))

#: What an event costs or does, the classification every analysis shares.
CATEGORIES: Final = ("compute", "collective", "memory", "sync", "other")
Category = pl.Enum(list(CATEGORIES))

#: Kinds that run on a GPU (device is set).
GPU_KINDS: Final = ("kernel", "memcpy", "memset", "sync", "gpu_annotation")
#: GPU kinds that keep the device busy (sync and annotations do not).
GPU_ACTIVITY_KINDS: Final = ("kernel", "memcpy", "memset")

#: The columns, in order, with their dtypes.
SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "kind": Kind,
    "category": Category,
    "name": pl.Categorical(),
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "device": pl.Int32(),
    "stream": pl.Int64(),
    "correlation": pl.Int64(),
    "external_id": pl.Int64(),
    "bytes": pl.Int64(),
    "coll_name": pl.Categorical(),
    "msg_nelems": pl.Int64(),
    "pg_name": pl.Categorical(),
    "group_size": pl.Int32(),
    "seq": pl.Int32(),  # a collective's sequence number in its process group (Kineto "Seq")
    # a kernel's threads: its grid's blocks times its block's threads (Kineto args "grid" and
    # "block", nsys gridX..blockZ); null for other events, where the file does not say, and at
    # or past THREADS_LIMIT
    "threads": pl.Int32(),
}

#: A launch of this many threads or more is recorded without its count (the ``threads`` column's
#: Int32 holds less; what the analyses look for, a kernel run by one thread, is far below it).
THREADS_LIMIT: Final = 2**31


def empty_events() -> pl.DataFrame:
    """An event frame with the schema and no rows."""
    return pl.DataFrame(schema=SCHEMA)


#: The name of an event its file gives none (every reader uses it).
UNNAMED: Final = "(unnamed)"


def without_null_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with each column that holds no value replaced by a null literal of its dtype.

    A literal column is one value broadcast to the frame's height: it holds no buffer, and
    stays one through filters, sorts, joins and concatenations of equal literals. Most
    columns of the schema are null in most traces (the collective arguments outside NCCL
    events, say): 5 of them are a quarter of a 5M-event frame's 0.5 GB when held as buffers.
    The nulls are counted as each column's pieces were made (no query: a file read in chunks
    asks per chunk and kind).
    """
    if frame.height == 0:
        return frame
    nulls = frame.null_count().row(0)
    empty = [null_literal(c, t) for (c, t), n in zip(frame.schema.items(), nulls, strict=True) if n == frame.height]
    return frame.with_columns(empty) if empty else frame


@functools.cache
def null_literal(column: str, dtype: pl.DataType) -> pl.Expr:
    """``column`` of no value, of ``dtype`` (built once: an expression took 40 us to build, and a
    file read in chunks asks for a few hundred)."""
    return pl.lit(None, dtype=dtype).alias(column)


def all_null(frame: pl.DataFrame, column: str) -> bool:
    """Whether ``frame`` has rows and ``column`` holds no value in any (read from the frame's null
    counts, which its columns keep: no query, a literal column read as no buffer)."""
    return frame.height > 0 and frame.null_count().get_column(column).item() == frame.height
