"""The built-in workloads' knobs, run in this process (no ranks): what each puts in forward."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tracekit.capture.workloads import BUILTIN, WorkloadContext

torch = pytest.importorskip("torch")

CTX = WorkloadContext(rank=0, world_size=1, batch_size=4, seed=0, learning_rate=1e-3)
HOST_READS = ("aten::is_nonzero", "aten::item", "aten::_local_scalar_dense")


def forward_ops(name: str, calls: int = 3, **knobs: Any) -> list[str]:
    """The names of the profiler's events of ``calls`` forward calls."""
    from torch.profiler import profile

    workload = BUILTIN[name](CTX, **knobs)
    batch = torch.stack([workload.dataset[i][0] for i in range(4)])
    with profile() as prof:
        for _ in range(calls):
            workload.model(batch)
    return [event.name for event in prof.events()]


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_sync_check_reads_the_host_once_per_forward(name: str) -> None:
    checked = forward_ops(name, sync_check=True)
    for op in HOST_READS:
        assert checked.count(op) == 3, op
    assert checked.count("aten::amax") == 6  # two small reductions per forward
    plain = forward_ops(name)
    assert not any(op in plain for op in HOST_READS)


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_forward_delay_sleeps_in_every_forward_of_every_rank(name: str) -> None:
    for rank in (0, 1):
        ctx = WorkloadContext(rank=rank, world_size=2, batch_size=4, seed=0, learning_rate=1e-3)
        workload = BUILTIN[name](ctx, forward_delay_ms=20.0)
        batch = torch.stack([workload.dataset[i][0] for i in range(4)])
        started = time.perf_counter()
        workload.model(batch)
        assert time.perf_counter() - started >= 0.020


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_forward_work_uses_that_much_cpu_time_in_every_forward(name: str) -> None:
    ctx = WorkloadContext(rank=0, world_size=2, batch_size=4, seed=0, learning_rate=1e-3)
    plain, worked = BUILTIN[name](ctx), BUILTIN[name](ctx, forward_work_ms=30.0)
    batch = torch.stack([plain.dataset[i][0] for i in range(4)])

    def cpu(model: object) -> float:
        started = time.thread_time()
        model(batch)  # type: ignore[operator]
        return time.thread_time() - started

    cpu(plain.model), cpu(worked.model)  # first calls: lazy set-up
    # CPU time, not wall time: the forward keeps its thread on a core for 30 ms however loaded the
    # machine. (Not compared with the plain forward's: on a loaded machine the calling thread of a
    # plain forward spins too, waiting for its intra-op threads, and that varies by 10 ms or more.)
    assert all(cpu(worked.model) >= 0.030 for _ in range(3))


def test_a_sleep_in_step_ends_on_the_tick_nearest_one_tick_later() -> None:
    from tracekit.capture.workloads import tick_sleep

    assert tick_sleep(10.0, 0.5) == pytest.approx(0.5)  # on a tick: one whole tick
    assert tick_sleep(10.1, 0.5) == pytest.approx(0.4)  # woken 0.1 late: the lateness is taken back
    assert tick_sleep(10.2, 0.5) == pytest.approx(0.3)
    assert tick_sleep(10.3, 0.5) == pytest.approx(0.7)  # past half a tick: the tick after, not 0.2 s
    # two sleepers a tick and a bit apart keep the whole tick and lose the bit
    ends = [now + tick_sleep(now, 0.16) for now in (100.0, 100.16 + 0.03)]
    assert ends[1] - ends[0] == pytest.approx(0.16)


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_loader_in_step_sleeps_to_the_tick(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tracekit.capture import workloads

    clock, slept = [100.013], []  # the first call 13 ms into a 20 ms tick, then each wakes 2 ms late

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds + 0.002

    monkeypatch.setattr(workloads.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(workloads.time, "sleep", sleep)
    stepped = BUILTIN[name](CTX, loader_delay_ms=20.0, loader_in_step=True)
    for i in range(3):
        stepped.dataset[i]
    assert slept == pytest.approx([0.027, 0.018, 0.018])  # to 100.04, then a tick less the lateness
    slept.clear()
    plain = BUILTIN[name](CTX, loader_delay_ms=20.0)
    for i in range(3):
        plain.dataset[i]
    assert slept == pytest.approx([0.020] * 3)
