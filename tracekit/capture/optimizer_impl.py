"""``optimizer_impl``: the workload's optimizer rebuilt with torch's ``foreach`` or ``fused`` step.

A workload factory returns any ``torch.optim.Optimizer``. ``foreach`` and ``fused`` rebuild it
through its own class's constructor: the same class, the same param groups (each group's own
lr, betas, weight decay ...) and defaults, with ``foreach=True`` and ``fused`` unset, or
``fused=True`` and ``foreach`` unset (torch refuses both at once). The rebuilt optimizer holds
the very param-group dicts of the original, which is what an LR scheduler changes: the
workload's scheduler, built on the original, drives the rebuilt one. Its state starts as its
constructor makes it (empty, or Adagrad's accumulators): state the factory gave the original
(loaded from a checkpoint) is not carried over.

An optimizer that has no such implementation (``LBFGS``, ``SparseAdam``, one not from torch),
that takes the flag without recording it in its defaults (so its step never reads it), or whose
constructor refuses the rebuild (``fused`` on a device or dtype it does not support,
``differentiable``) is an :class:`~tracekit.errors.InputError` in one line naming the class and
the option.
"""

from __future__ import annotations

import inspect
from typing import Any, Final

from tracekit.errors import InputError

__all__ = ["implementation", "rebuild"]

#: Each implementation flag, and the one it must leave unset.
_OTHER: Final = {"foreach": "fused", "fused": "foreach"}


def _name(cls: type) -> str:
    return cls.__qualname__ if cls.__module__.startswith("torch.optim") else f"{cls.__module__}.{cls.__qualname__}"


def _parameters(cls: type) -> tuple[set[str], bool]:
    """The keyword parameters of ``cls``'s constructor, and whether it takes ``**kwargs``."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # a constructor without a signature (a C extension): try it
        return set(), True
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named, any(p.kind is p.VAR_KEYWORD for p in params.values())


def rebuild(optimizer: Any, impl: str) -> Any:
    """``optimizer`` rebuilt with ``impl`` (``foreach`` or ``fused``) set, on its own param
    groups; ``optimizer`` itself for ``default``. Raises :class:`InputError` naming the class
    and the option when the class cannot be rebuilt so."""
    if impl == "default":
        return optimizer
    import torch

    cls = type(optimizer)
    option = f"optimizer_impl={impl}"
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InputError(f"{option}: the workload's optimizer {_name(cls)} is not a torch.optim.Optimizer")
    named, kwargs = _parameters(cls)
    if impl not in named and not kwargs:
        raise InputError(f"{option}: {_name(cls)} has no {impl} implementation (its constructor takes no {impl})")
    other = _OTHER[impl]
    flags: dict[str, Any] = {impl: True}
    if other in named or (kwargs and other in optimizer.defaults):
        flags[other] = None
    for group in optimizer.param_groups:  # the same dicts: a scheduler's changes reach the rebuilt one
        group.update({k: v for k, v in flags.items() if k == impl or k in group})
    hyper = {k: v for k, v in optimizer.defaults.items() if k in named}
    try:
        rebuilt = cls(optimizer.param_groups, **{**hyper, **flags})
    except Exception as exc:  # the constructor's own check: a device, a dtype, differentiable
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise InputError(f"{option}: {_name(cls)} cannot be rebuilt with {impl}=True ({reason})") from exc
    if rebuilt.defaults.get(impl) is not True:
        raise InputError(f"{option}: {_name(cls)} takes {impl} but does not record it, so its step does not use it")
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):  # a scheduler on the original checks it stepped first
        rebuilt.register_step_post_hook(lambda *_: setattr(optimizer, "_opt_called", True))
    return rebuilt


def implementation(optimizer: Any) -> dict[str, Any]:
    """The optimizer's class and the implementation flags it holds (for summary.json)."""
    defaults = getattr(optimizer, "defaults", None)
    flags = {k: defaults.get(k) for k in _OTHER} if isinstance(defaults, dict) else {}
    return {"class": _name(type(optimizer)), **flags}
