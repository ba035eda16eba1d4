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


class _CorruptSample:
    """A dataset whose every sample fails to load (the user's bug, on the line below)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> Any:
        raise ValueError(f"corrupt sample {index}")


def corrupt_dataset(ctx: WorkloadContext, **kwargs: Any) -> Workload:
    """The built-in MLP whose dataset raises on every sample."""
    workload = mlp(ctx, **kwargs)
    workload.dataset = _CorruptSample()
    return workload


def not_a_dataset(ctx: WorkloadContext, **kwargs: Any) -> Workload:
    """The built-in MLP whose dataset is a number."""
    workload = mlp(ctx, **kwargs)
    workload.dataset = 42
    return workload


def _constant_loss(outputs: Any, targets: Any) -> Any:
    import torch

    return torch.tensor(1.0)  # no graph: backward() has nothing to differentiate


def loss_without_gradients(ctx: WorkloadContext, **kwargs: Any) -> Workload:
    """The built-in MLP whose loss does not depend on the model."""
    workload = mlp(ctx, **kwargs)
    workload.loss_fn = _constant_loss
    return workload
