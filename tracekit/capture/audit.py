"""``tracekit audit-params``: one forward + backward, then which parameters got no gradient.

:func:`audit_params` builds the config's workload as rank 0 of 1 (no launcher, no DDP: DDP
would refuse an unused parameter before it could be listed), takes one real batch from its
DataLoader, runs forward, the loss and backward once, and classifies every parameter with
:func:`classify` (the rules: :mod:`tracekit.results.param_audit`). The device is the GPU when
CUDA is present, else the CPU.

One batch decides: a parameter used only on some inputs (a mixture-of-experts expert the
router did not pick, a branch taken on some batches) shows as unused here and may be used on
others; the result's notes say so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from tracekit.capture.config import CaptureConfig, to_dict
from tracekit.capture.runner import build_workload, make_dataloader, to_device
from tracekit.capture.user_code import user_code
from tracekit.capture.workloads import resolve
from tracekit.errors import InputError
from tracekit.results.param_audit import ModuleParams, ParamAudit
from tracekit.results.vocab import AuditNote

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["audit_params", "classify"]


def _grouped(named: Iterable[tuple[str, Any]]) -> list[ModuleParams]:
    """Parameters grouped by the module that owns them, in model order."""
    groups: dict[str, tuple[list[str], list[int]]] = {}
    for name, param in named:
        module, _, leaf = name.rpartition(".")
        names, sizes = groups.setdefault(module, ([], []))
        names.append(leaf)
        sizes.append(int(param.numel()))
    return [ModuleParams(module=m, parameters=names, numel=sum(sizes)) for m, (names, sizes) in groups.items()]


def classify(model: Any, *, include_zero_grad: bool = False, device: str = "cpu") -> ParamAudit:
    """Classify the parameters of ``model`` after a backward pass: unused (requires a gradient,
    got none), frozen, and with ``include_zero_grad`` those whose gradient is all zeros."""
    named = list(model.named_parameters())
    unused = [(n, p) for n, p in named if p.requires_grad and p.grad is None]
    frozen = [(n, p) for n, p in named if not p.requires_grad]
    zero = [(n, p) for n, p in named if p.requires_grad and p.grad is not None and not bool(p.grad.any())]
    return ParamAudit(
        device=device,
        parameters=len(named),
        numel=sum(int(p.numel()) for _, p in named),
        unused=_grouped(unused),
        frozen=_grouped(frozen),
        zero_grad=_grouped(zero) if include_zero_grad else None,
    )


def audit_params(config: CaptureConfig, *, include_zero_grad: bool = False) -> ParamAudit:
    """One forward + backward of ``config``'s workload on one real batch, on one process;
    returns which parameters got no gradient (and, when asked, an all-zero one)."""
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workload = build_workload(config, 0, 1)
    single = msgspec.structs.replace(config, num_workers=0, prefetch_factor=None, persistent_workers=False)
    name, factory = f"workload {config.workload!r}", resolve(config.workload)
    with user_code(f"{name}: its data (the first batch)", blame=(workload.dataloader or workload.dataset, factory)):
        loader = make_dataloader(single, workload)
        batch = next(iter(loader), None)
    if not isinstance(batch, (list, tuple)) or len(batch) != 2:
        what = "no batch" if batch is None else f"a {type(batch).__name__}, not (inputs, targets)"
        raise InputError(f"{name}: its DataLoader yields {what}")
    inputs, targets = batch
    with user_code(f"{name}: its model (forward)", blame=(workload.model, factory)):
        model = workload.model.to(device)
        model.train()
        model.zero_grad(set_to_none=True)
        inputs, targets = to_device((inputs, targets), device, False)
        outputs = model(inputs)
    with user_code(f"{name}: its loss_fn (the loss, then backward)", blame=(workload.loss_fn, factory)):
        workload.loss_fn(outputs, targets).backward()
    audit = classify(model, include_zero_grad=include_zero_grad, device=device.type)
    return msgspec.structs.replace(
        audit, config=to_dict(config), batch_size=config.batch_size, notes=[*audit.notes, AuditNote.ONE_BATCH]
    )
