"""The counters table: time series beside the intervals of the event schema.

One row is one change of memory on one device of one rank: an allocation (``bytes`` > 0) or
a free (``bytes`` < 0) at ``time_ns`` (integer ns on the clock of the rank's events), with the
totals on that device right after it. Rows are in time order within a rank; rows at the same
time keep the order the file gave them, so the last row of a time holds the totals then.

What the totals count depends on the source:

* Kineto ``[memory]`` events (``torch.profiler(profile_memory=True)``): PyTorch's allocators.
  ``total_allocated`` is what tensors hold, ``total_reserved`` what the caching allocator holds
  from the device (0 on CPU, which has no caching allocator); ``addr`` is the block's address.
* Nsight Systems ``CUDA_GPU_MEMORY_USAGE_EVENTS`` (``nsys profile --cuda-memory-usage=true``):
  CUDA's allocations (``cudaMalloc``, pools...), which is what PyTorch reserved plus other
  libraries' buffers. ``total_reserved`` is their running sum from the start of the capture
  (memory allocated before it is not seen, so it can go below zero); ``total_allocated`` is
  null, since tensors inside the caching allocator are invisible to CUDA. Pinned and pageable
  host memory is on device type ``cpu``.
"""

from __future__ import annotations

from typing import Final

import polars as pl

#: The kinds of device memory lives on (PyTorch's device types that profilers report).
DEVICE_TYPES: Final = ("cpu", "cuda", "hip", "xpu", "mps", "hpu", "mtia", "privateuse1", "other")
DeviceType = pl.Enum(list(DEVICE_TYPES))

#: The columns, in order, with their dtypes.
COUNTER_SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "time_ns": pl.Int64(),
    "device_type": DeviceType,
    #: the device index; null on the host
    "device": pl.Int32(),
    #: the address of the block allocated or freed, when known
    "addr": pl.Int64(),
    #: the signed change of this row: + allocated, - freed
    "bytes": pl.Int64(),
    "total_allocated": pl.Int64(),
    "total_reserved": pl.Int64(),
}


def empty_counters() -> pl.DataFrame:
    """A counters frame with the schema and no rows."""
    return pl.DataFrame(schema=COUNTER_SCHEMA)


#: What a categorized memory timeline (``torch.profiler``'s ``export_memory_timeline``, raw form)
#: calls each tensor, by the index the file writes: ``_CATEGORY_TO_INDEX`` of
#: ``torch/profiler/_memory_profiler.py`` (the last, 7, is a tensor it could not categorize).
MEMORY_CATEGORIES: Final = (
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
)
MemoryCategory = pl.Enum(list(MEMORY_CATEGORIES))

#: The categorized timeline of one rank: one row per change of one category's bytes.
#: ``time_ns`` is null for memory that existed before profiling began (PREEXISTING).
CATEGORY_SCHEMA: Final[dict[str, pl.DataType]] = {
    "rank": pl.Int32(),
    "time_ns": pl.Int64(),
    #: torch's Action: 1 preexisting, 2 create, 3 increment version, 4 destroy
    "action": pl.Int8(),
    "category": MemoryCategory,
    #: the signed change: + created, - destroyed
    "bytes": pl.Int64(),
}


def empty_categories() -> pl.DataFrame:
    """A categorized memory timeline with the schema and no rows."""
    return pl.DataFrame(schema=CATEGORY_SCHEMA)
