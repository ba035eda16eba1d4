"""Workloads for the parameter audit's tests (imported by name, as a user's factory is)."""

from __future__ import annotations

from typing import Any

from tracekit.capture import Workload
from tracekit.capture.workloads import WorkloadContext, mlp


def frozen_first_layer(ctx: WorkloadContext, **kwargs: Any) -> Workload:
    """The built-in MLP with its first Linear frozen (``requires_grad=False``)."""
    workload = mlp(ctx, **kwargs)
    for param in workload.model.inner[0].parameters():
        param.requires_grad_(False)
    return workload
