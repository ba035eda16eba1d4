"""The workloads of ``benchmarks/gpu_calibration.py`` that the built-in ``mlp`` cannot make:
each a user's workload file (``--workload benchmarks/gpu_workloads/calibration.py:NAME``), with
one knob that is the fix the case measures. The folder holds no other module: a workload's
folder comes first on the ranks' import path, where ``benchmarks/profile.py`` would hide the
standard library's ``profile``.

* ``launch``: many small operators (a deep, narrow stack of Linear, LayerNorm and GELU on a small
  batch): the host's dispatching sets the pace on a GPU. ``graphs=true`` is the fix: the stack's
  forward and backward recorded once as CUDA graphs (``torch.cuda.make_graphed_callables``) and
  replayed every step; ``compile=true`` runs it through ``torch.compile`` instead (its default mode).
* ``many_params``: a model of many small parameter tensors and little compute, so that the
  optimizer's step is most of the step: ``foreach=false`` (the default here) is AdamW's
  for-loop implementation, a few kernels for every parameter; ``optimizer_impl=fused`` (the
  capture's option) is the fix.
* ``transfer``: wide input rows (128 KiB a sample) into a small model: the host-to-device copy of
  each batch is most of the step. The fix is the capture's ``pin_memory=true`` (pinned batches,
  ``non_blocking`` copies).
* ``fragment``: every forward allocates a scratch buffer larger than the one before and frees it,
  as growing sequence lengths do. The caching allocator cannot reuse a smaller freed block for a
  larger request, so reserved memory grows by every size while allocated memory stays near the
  largest. The fix is ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (one segment that grows).
"""

from __future__ import annotations

from typing import Any

import torch

from tracekit.capture.workloads import Workload, WorkloadContext


class _Rows:
    """A dataset of ``samples`` (row, class) pairs, each row a view of one of a few rows made
    once (so making a batch costs its collate's copy, not random numbers)."""

    def __init__(self, rows: Any, classes: int, samples: int) -> None:
        self.rows, self.classes, self.samples = rows, classes, samples

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return self.rows[index % self.rows.shape[0]], torch.tensor(index % self.classes)


def _dataset(ctx: WorkloadContext, features: int, classes: int, pool: int = 64) -> _Rows:
    g = torch.Generator().manual_seed(ctx.seed)
    # enough samples for every step of a capture, in whole batches (a graph's input keeps its shape)
    return _Rows(torch.randn(pool, features, generator=g), classes, samples=ctx.batch_size * 512)


class Graphed(torch.nn.Module):
    """Wraps a module so that its first forward on a CUDA input records its forward and backward as
    CUDA graphs (``torch.cuda.make_graphed_callables``); every later call replays them."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.graphed: Any = None

    def forward(self, x: torch.Tensor) -> Any:
        if not x.is_cuda:
            raise RuntimeError("graphs=true needs a CUDA device: CUDA graphs record GPU work")
        if self.graphed is None:
            self.graphed = torch.cuda.make_graphed_callables(self.inner, (torch.zeros_like(x),))
        return self.graphed(x)


def launch(
    ctx: WorkloadContext,
    *,
    width: int = 256,
    depth: int = 16,
    classes: int = 10,
    graphs: bool = False,
    compile: bool = False,
) -> Workload:
    """A deep stack of small layers: about 6 kernels a layer forward and 10 backward, microseconds each."""
    torch.manual_seed(ctx.seed)
    layers: list[Any] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.GELU()]
    layers.append(torch.nn.Linear(width, classes))
    model: Any = torch.nn.Sequential(*layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=ctx.learning_rate)
    if graphs:
        model = Graphed(model)
    elif compile:
        model = torch.compile(model)
    return Workload(
        model=model,
        optimizer=optimizer,
        loss_fn=torch.nn.functional.cross_entropy,
        dataset=_dataset(ctx, width, classes),
    )


def many_params(
    ctx: WorkloadContext,
    *,
    width: int = 1024,
    tensors: int = 384,
    classes: int = 10,
    foreach: bool = False,
) -> Workload:
    """One Linear layer scaled by the sum of ``tensors`` small parameter vectors: forward and
    backward are a few kernels, AdamW's for-loop step about a dozen for each vector."""
    torch.manual_seed(ctx.seed)

    class ManyParams(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(width, width)
            self.scales = torch.nn.ParameterList(
                torch.nn.Parameter(torch.full((width,), 1.0 / tensors)) for _ in range(tensors)
            )
            self.head = torch.nn.Linear(width, classes)

        def forward(self, x: Any) -> Any:
            scale = torch.stack(list(self.scales)).sum(0)
            return self.head(torch.relu(self.linear(x) * scale))

    model = ManyParams()
    optimizer = torch.optim.AdamW(model.parameters(), lr=ctx.learning_rate, foreach=foreach)
    return Workload(
        model=model,
        optimizer=optimizer,
        loss_fn=torch.nn.functional.cross_entropy,
        dataset=_dataset(ctx, width, classes),
    )


def transfer(
    ctx: WorkloadContext,
    *,
    features: int = 32768,
    hidden: int = 64,
    classes: int = 10,
) -> Workload:
    """Wide rows into a small model: a batch of 256 is 32 MiB to copy, a few kernels to compute."""
    torch.manual_seed(ctx.seed)
    model = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes))
    return Workload(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=ctx.learning_rate),
        loss_fn=torch.nn.functional.cross_entropy,
        dataset=_dataset(ctx, features, classes),
    )


def fragment(
    ctx: WorkloadContext,
    *,
    width: int = 1024,
    base_mb: float = 256.0,
    grow_mb: float = 64.0,
    classes: int = 10,
) -> Workload:
    """A small MLP whose every forward also fills a scratch buffer ``grow_mb`` larger than the
    last one's (``base_mb`` the first), freed before the step ends."""
    torch.manual_seed(ctx.seed)

    class Fragmenting(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Sequential(
                torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, classes)
            )
            self.calls = 0

        def forward(self, x: Any) -> Any:
            size = int((base_mb + grow_mb * self.calls) * (1 << 20)) // 4
            self.calls += 1
            scratch = torch.empty(size, device=x.device)
            scratch.fill_(1.0)
            out = self.body(x) + 0 * scratch[:1]
            del scratch
            return out

    model = Fragmenting()
    return Workload(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=ctx.learning_rate),
        loss_fn=torch.nn.functional.cross_entropy,
        dataset=_dataset(ctx, width, classes),
    )
