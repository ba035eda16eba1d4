"""How a run is data-parallel (DDP, FSDP, ZeRO), from its own ops or from its capture's config.

The communication advice depends on it: DDP's knobs are its gradient buckets, FSDP's its
prefetching, resharding and sharding strategy, ZeRO's its overlap and bucket sizes; telling an
FSDP run to tune ``bucket_cap_mb`` or to "try FSDP" is advice for another run.

The trace tells first, by the host events each one records (operators, ``record_function``
ranges, Python frames):

=========  ==========================================================================================
run        signs in the trace
=========  ==========================================================================================
FSDP       FSDP2's ranges and operators (``FSDP::pre_forward (layer)``, ``FSDP::all_gather``,
           ``fsdp::all_gather_copy_in``, ``fsdp::chunk_cat``), FSDP1's ranges
           (``FullyShardedDataParallel.forward``, ``FullyShardedDataParallel._pre_forward``...), or
           Python frames in ``torch/distributed/fsdp/``
ZeRO       Python frames in ``deepspeed/runtime/zero/`` (DeepSpeed records no operators or ranges of
           its own under torch.profiler: its NVTX ranges reach Nsight Systems only)
DDP        ``DistributedDataParallel.forward`` (the range DDP records around each forward), or Python
           frames in ``torch/nn/parallel/distributed.py``
=========  ==========================================================================================

FSDP's or ZeRO's signs win over DDP's (a model may hold a DDP-wrapped part). Without signs, the
capture's summary decides: its ``accelerate_config`` (``fsdp``, ``fsdp2``, ``fsdp_shard_grad_op``,
``deepspeed_zero2``/``3``, ``ddp``), else accelerate's ``distributed_type`` (``FSDP``,
``DEEPSPEED``, ``MULTI_GPU``...: on CPU tracekit applies FSDP itself and accelerate reports
``MULTI_CPU``, so the config comes first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import polars as pl

from tracekit.model.taxonomy import HOST_KINDS
from tracekit.results.vocab import Parallelism

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tracekit.model.run import Run
    from tracekit.results.capture import CaptureSummary

#: Host event names of each kind of run (each a count column of the run's facts).
SIGNS: Final[dict[Parallelism, str]] = {
    Parallelism.FSDP: r"^FSDP::|^fsdp::|^FullyShardedDataParallel[._]|(?:^|/)torch/distributed/fsdp/",
    Parallelism.ZERO: r"(?:^|/)deepspeed/runtime/zero/",
    Parallelism.DDP: r"^DistributedDataParallel\.forward$|(?:^|/)torch/nn/parallel/distributed\.py\(",
}
#: The order in which signs decide.
PRECEDENCE: Final = (Parallelism.FSDP, Parallelism.ZERO, Parallelism.DDP)

#: tracekit's built-in accelerate configs.
_CONFIGS: Final = {
    "fsdp": Parallelism.FSDP,
    "fsdp2": Parallelism.FSDP,
    "fsdp_shard_grad_op": Parallelism.FSDP,
    "deepspeed_zero2": Parallelism.ZERO,
    "deepspeed_zero3": Parallelism.ZERO,
    "ddp": Parallelism.DDP,
}
#: accelerate's ``distributed_type`` (``MULTI_*``: DDP over several processes).
_DISTRIBUTED_TYPES: Final = {"FSDP": Parallelism.FSDP, "DEEPSPEED": Parallelism.ZERO}


def column(kind: Parallelism) -> str:
    """The name of the count column of ``kind``'s signs."""
    return f"{kind.value}_ops"


def sign_flags(run: Run) -> dict[str, pl.Expr]:
    """Per event, whether it is a sign of each kind of run (one boolean expression per kind;
    each pattern is tested once per distinct name)."""
    host = pl.col("kind").is_in(list(HOST_KINDS))
    return {column(k): host & pl.col("name").is_in(run.names_matching(p).implode()) for k, p in SIGNS.items()}


def from_signs(counts: Mapping[str, int]) -> Parallelism | None:
    """The kind of run whose signs were counted (``counts`` by :func:`column`), or None."""
    return next((k for k in PRECEDENCE if counts.get(column(k), 0) > 0), None)


def from_capture(capture: CaptureSummary | None) -> Parallelism | None:
    """The kind of run a capture's summary names (its config, then its environment), or None."""
    if capture is None:
        return None
    named = (capture.config or {}).get("accelerate_config")
    if isinstance(named, str) and named in _CONFIGS:
        return _CONFIGS[named]
    environment = capture.environment or {}
    kind = environment.get("distributed_type")
    if isinstance(kind, str) and kind in _DISTRIBUTED_TYPES:
        return _DISTRIBUTED_TYPES[kind]
    ranks = environment.get("world_size")
    if isinstance(kind, str) and kind.startswith("MULTI_") and isinstance(ranks, int) and ranks > 1:
        return Parallelism.DDP
    return None
