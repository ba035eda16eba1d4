"""Memory over time from an Nsight Systems export: ``CUDA_GPU_MEMORY_USAGE_EVENTS`` -> counters.

The table holds one row per CUDA allocation or free (``cudaMalloc``, ``cudaFree``, pools,
pinned host memory) when the report was recorded with ``nsys profile
--cuda-memory-usage=true``; like every table it exists only when it has rows. Each row
becomes one row of :data:`tracekit.model.counters.COUNTER_SCHEMA`: ``bytes`` signed by the
operation, ``total_reserved`` the running sum per process and device from the start of the
capture, ``total_allocated`` null (see :mod:`tracekit.model.counters`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.model.counters import COUNTER_SCHEMA, DeviceType

if TYPE_CHECKING:
    from tracekit.readers.nsys_meta import Export

MEMORY_TABLE: Final = "CUDA_GPU_MEMORY_USAGE_EVENTS"
#: ENUM_CUDA_DEV_MEM_EVENT_OPER: 0 allocation, 1 deallocation.
DEALLOCATION: Final = 1
#: ENUM_CUDA_MEM_KIND of host memory (pageable, pinned), which is the cpu's, and of unknown memory.
HOST_KINDS: Final = (0, 1)
UNKNOWN_KIND: Final = 7
_GLOBAL_ID: Final = 1 << 24
_NEEDED: Final = frozenset({"start", "globalPid", "bytes"})
_RAW: Final[dict[str, pl.DataType]] = {
    "start": pl.Int64(),
    "gid": pl.Int64(),
    "device_id": pl.Int64(),
    "addr": pl.Int64(),
    "size": pl.Int64(),
    "mem_kind": pl.Int64(),
    "operation": pl.Int64(),
}


def empty_memory() -> pl.DataFrame:
    """What :func:`memory_rows` returns without memory rows: ``pid`` and the counters' columns."""
    return pl.DataFrame(schema={"pid": pl.Int64(), **COUNTER_SCHEMA})


def memory_rows(db: Export, *, epoch_ns: int) -> pl.DataFrame:
    """Every process's memory rows: ``pid`` beside the counters' columns, in time order.

    Times are ns after the session start plus ``epoch_ns``, as the events' are.
    """
    cols = db.columns(MEMORY_TABLE)
    if not cols >= _NEEDED:
        return empty_memory()

    def col(name: str) -> str:
        return f"t.{name}" if name in cols else "NULL"

    sql = (
        f"SELECT t.start, t.globalPid, {col('deviceId')}, {col('address')}, t.bytes, {col('memKind')}, "
        f"{col('memoryOperationType')} FROM {MEMORY_TABLE} t"
    )
    raw = db.frame(sql, _RAW).sort("start", maintain_order=True)
    kind = pl.col("mem_kind")
    device_type = (
        pl.when(kind.is_in(HOST_KINDS))
        .then(pl.lit("cpu"))
        .when(kind == UNKNOWN_KIND)
        .then(pl.lit("other"))
        .otherwise(pl.lit("cuda"))
        .cast(DeviceType)
    )
    signed = pl.when(pl.col("operation") == DEALLOCATION).then(-pl.col("size")).otherwise(pl.col("size"))
    return (
        raw.lazy()
        .select(
            pid=(pl.col("gid") // _GLOBAL_ID) % _GLOBAL_ID,
            rank=pl.lit(None, dtype=pl.Int32),
            time_ns=pl.col("start") + epoch_ns,
            device_type=device_type,
            device=pl.when(device_type != "cpu").then(pl.col("device_id")),
            addr=pl.col("addr"),
            bytes=signed,
            total_allocated=pl.lit(None, dtype=pl.Int64),
        )
        .with_columns(total_reserved=pl.col("bytes").cum_sum().over("pid", "device_type", "device"))
        .select(pl.col("pid"), *(pl.col(c).cast(t, strict=False) for c, t in COUNTER_SCHEMA.items()))
        .collect()
    )
