"""Kineto traces of accelerators other than CUDA and ROCm, as libkineto writes their categories."""

from __future__ import annotations

from typing import Any

#: The host process of the traces below; the device's track is its id (Kineto's device pid).
HOST_PID = 4242
DEVICE = 0
#: MTIA's launch call (HTA's name for it) and a copy it reads as memory work.
MTIA_LAUNCH = "runFunction - job_prep_and_submit_for_execution"
MTIA_COPY = "dma_request"


def host(cat: str, name: str, ts: float, dur: float, *, tid: int = 1, **args: Any) -> dict[str, Any]:
    """One host event of the training process."""
    return {"ph": "X", "cat": cat, "name": name, "pid": HOST_PID, "tid": tid, "ts": ts, "dur": dur, "args": args}


def on_device(cat: str, name: str, ts: float, dur: float, *, pid: int = DEVICE, **args: Any) -> dict[str, Any]:
    """One event on a device's track (``pid`` is the device, as Kineto writes it), queue 3."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": 3, "ts": ts, "dur": dur, "args": args}


def mtia_steps(
    steps: int = 4, *, device_cat: str = "mtia_ccp_events", backward_allreduce: bool = True
) -> list[dict[str, Any]]:
    """``steps`` steps of 1000 us of an MTIA-style training loop, world of one.

    Each step: an operator launches 4 kernels and one copy (``mtia_runtime`` launches with
    correlation ids, the device work ``device_cat`` on device 0, queue 3, with device,
    stream and correlation in its args) that keep the device busy [50, 950) of the step: the
    copy [50, 150), the kernels [150, 950) back to back; then the training thread sits in a
    device sync [200, 950) (an ``mtia_runtime`` call, no operator) and runs the optimizer
    [950, 1000). A backward thread's DDP all-reduce (``c10d::allreduce_``, ``record_param_comms``)
    is in flight [300, 700) of the step: on one rank it exchanges with no one.
    """
    events: list[dict[str, Any]] = []
    correlation = 1
    for s in range(steps):
        t = 1_000_000.0 + 1000.0 * s
        events += [
            host("user_annotation", f"ProfilerStep#{s + 1}", t, 1000),
            host("cpu_op", "aten::linear", t + 1, 49, **{"External id": s + 1}),
        ]
        for k in range(5):
            start = t + 50 + (0 if k == 0 else 100 + 200 * (k - 1))
            length = 100 if k == 0 else 200
            events += [
                host("mtia_runtime", MTIA_LAUNCH, t + 2 + 9 * k, 8, correlation=correlation),
                on_device(
                    device_cat,
                    MTIA_COPY if k == 0 else "fused_linear_relu",
                    start,
                    length,
                    device=DEVICE,
                    stream=3,
                    correlation=correlation,
                ),
            ]
            correlation += 1
        events.append(host("mtia_runtime", "synchronize", t + 200, 750, correlation=correlation))
        correlation += 1
        events.append(host("cpu_op", "Optimizer.step#SGD.step", t + 950, 50))
        if backward_allreduce:
            events += [
                host("cpu_op", "c10d::allreduce_", t + 300, 400, tid=2),
                host("cpu_op", "record_param_comms", t + 301, 398, tid=2, **{"Collective name": "allreduce"}),
            ]
    return events
