"""How a run is data-parallel: from its host events, else from its capture's summary."""

from __future__ import annotations

from typing import Any

import pytest

from tests.analyzers.test_caveats import summary
from tests.factories import ev, make_run
from tracekit.analyzers import analyze
from tracekit.analyzers.run_kind import column, from_capture, from_signs
from tracekit.results.vocab import Parallelism


def kind_of(*names: tuple[str, str]) -> Parallelism | None:
    """The parallelism an analysis finds in one step holding these (kind, name) host events."""
    rows = [ev("step", "ProfilerStep#1", 0, 1000), *(ev(k, n, 10 * i, 10 * i + 5) for i, (k, n) in enumerate(names))]
    return analyze(make_run(rows)).run.parallelism


@pytest.mark.parametrize(
    ("events", "expected"),
    [
        # FSDP2 (fully_shard), as a CPU capture records it
        ((("annotation", "FSDP::pre_forward (inner.0)"), ("cpu_op", "fsdp::all_gather_copy_in")), Parallelism.FSDP),
        # FSDP1
        ((("annotation", "FullyShardedDataParallel.forward"),), Parallelism.FSDP),
        ((("python", "torch/distributed/fsdp/_runtime_utils.py(412): _pre_forward"),), Parallelism.FSDP),
        ((("python", "/usr/lib/deepspeed/runtime/zero/stage3.py(1200): step"),), Parallelism.ZERO),
        ((("annotation", "DistributedDataParallel.forward"),), Parallelism.DDP),
        # FSDP's signs win over DDP's (a DDP-wrapped part of an FSDP model)
        ((("annotation", "DistributedDataParallel.forward"), ("cpu_op", "fsdp::chunk_cat")), Parallelism.FSDP),
        ((("cpu_op", "c10d::allreduce_"), ("cpu_op", "aten::mm")), None),  # communication says nothing of the kind
        ((("cpu_op", "FSDP_like_user_op"), ("annotation", "my_fsdp_step")), None),
    ],
)
def test_signs_in_the_trace(events: tuple[tuple[str, str], ...], expected: Parallelism | None) -> None:
    assert kind_of(*events) is expected


def test_precedence_of_counted_signs() -> None:
    assert from_signs({column(Parallelism.DDP): 3, column(Parallelism.ZERO): 1}) is Parallelism.ZERO
    assert from_signs({column(Parallelism.DDP): 0}) is None
    assert from_signs({}) is None


@pytest.mark.parametrize(
    ("config", "environment", "expected"),
    [
        # on CPU tracekit applies FSDP itself and accelerate says MULTI_CPU: the config comes first
        ({"accelerate_config": "fsdp2"}, {"distributed_type": "MULTI_CPU", "world_size": 2}, Parallelism.FSDP),
        ({"accelerate_config": "fsdp_shard_grad_op"}, None, Parallelism.FSDP),
        ({"accelerate_config": "deepspeed_zero3"}, None, Parallelism.ZERO),
        ({"accelerate_config": "/home/me/my.yaml"}, {"distributed_type": "FSDP"}, Parallelism.FSDP),
        ({}, {"distributed_type": "DEEPSPEED"}, Parallelism.ZERO),
        ({}, {"distributed_type": "MULTI_GPU", "world_size": 4}, Parallelism.DDP),
        ({}, {"distributed_type": "MULTI_GPU", "world_size": 1}, None),  # one rank: nothing to shard or reduce
        ({}, {"distributed_type": "NO"}, None),
        (None, None, None),
    ],
)
def test_from_capture(config: dict[str, Any] | None, environment: dict[str, Any] | None, expected: object) -> None:
    assert from_capture(summary(config, environment)) is expected
    assert from_capture(None) is None
