"""Classification of events into compute / collective / memory / sync / other.

One polars expression, used by every reader and analyzer, so that a kernel is a collective
in exactly one place. Collectives are matched by name on both sides:

* GPU kernels of NCCL (``ncclKernel_*``, ``ncclDevKernel_*``), RCCL and MSCCL;
* host operators of CPU backends and of the c10d front end (``gloo:all_reduce``,
  ``c10d::allreduce_``, ``nccl:all_reduce``, ``record_param_comms``), which are the only
  record of communication in a CPU-only (gloo) run.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from tracekit.model.schema import Category

#: GPU kernels that are collectives (NCCL, RCCL, MSCCL), matched case-insensitively.
COLLECTIVE_KERNEL_PATTERN: Final = r"(?i)(^|[^a-z])(nccl|rccl|msccl)"
#: Host-side collective operators and annotations.
COLLECTIVE_HOST_PATTERN: Final = (
    r"^(gloo:|nccl:|mpi:|ucc:|c10d::|c10d_functional::|_c10d_functional::)|^record_param_comms$"
)


def category_expr() -> pl.Expr:
    """The ``category`` of every event, from ``kind`` and ``name``."""
    kind = pl.col("kind")
    name = pl.col("name").cast(pl.String)
    return (
        pl.when(kind == "kernel")
        .then(
            pl.when(name.str.contains(COLLECTIVE_KERNEL_PATTERN))
            .then(pl.lit("collective"))
            .otherwise(pl.lit("compute"))
        )
        .when(kind.is_in(["memcpy", "memset"]))
        .then(pl.lit("memory"))
        .when(kind == "sync")
        .then(pl.lit("sync"))
        .when(kind.is_in(["cpu_op", "annotation"]) & name.str.contains(COLLECTIVE_HOST_PATTERN))
        .then(pl.lit("collective"))
        .otherwise(pl.lit("other"))
        .cast(Category)
        .alias("category")
    )


def classify(events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with its ``category`` column (re)computed."""
    return events.with_columns(category_expr())
