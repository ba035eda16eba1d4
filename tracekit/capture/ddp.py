"""DDP's options from the config, and what a rank's model ran with.

``find_unused_parameters``, ``ddp_bucket_cap_mb`` and ``ddp_gradient_as_bucket_view`` reach DDP
through accelerate's ``DistributedDataParallelKwargs`` (:func:`kwargs_handler`). They apply only
where accelerate wraps the model in ``DistributedDataParallel``: under FSDP, DeepSpeed, or on one
rank without a process group they do nothing, and :func:`no_effect` notes the options that were set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from tracekit.errors import InputError
from tracekit.results.capture import CaptureNote
from tracekit.results.vocab import CaptureNoteKind

if TYPE_CHECKING:
    from tracekit.capture.config import CaptureConfig

__all__ = ["OPTIONS", "kwargs_handler", "no_effect", "register_hook", "settings"]

#: The config's DDP options, each with its value when not set (DDP's own default).
OPTIONS: Final = {
    "find_unused_parameters": False,
    "ddp_bucket_cap_mb": None,
    "ddp_gradient_as_bucket_view": False,
    "ddp_comm_hook": "default",
}
_MIB: Final = 1 << 20


def kwargs_handler(config: CaptureConfig) -> Any:
    """accelerate's ``DistributedDataParallelKwargs`` with the config's DDP options;
    ``bucket_cap_mb`` only when set (else DDP's default, with its smaller first bucket)."""
    from accelerate.utils import DistributedDataParallelKwargs

    options: dict[str, Any] = {
        "find_unused_parameters": config.find_unused_parameters,
        "gradient_as_bucket_view": config.ddp_gradient_as_bucket_view,
    }
    if config.ddp_bucket_cap_mb is not None:
        options["bucket_cap_mb"] = config.ddp_bucket_cap_mb
    return DistributedDataParallelKwargs(**options)


def register_hook(model: Any, hook: str) -> str | None:
    """Register DDP's communication hook named ``hook`` (``fp16``, ``bf16``, ``noop``) on
    ``model`` when DDP wraps it; returns the hook's name as registered (None: none)."""
    from torch.nn.parallel import DistributedDataParallel

    if hook == "default" or not isinstance(model, DistributedDataParallel):
        return None
    from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks, default_hooks

    hooks = {
        "fp16": default_hooks.fp16_compress_hook,
        "bf16": default_hooks.bf16_compress_hook,
        "noop": debugging_hooks.noop_hook,
    }
    chosen = hooks[hook]
    if hook == "bf16":
        import torch.distributed as dist

        backend = str(dist.get_backend(model.process_group))
        if backend != "nccl":  # PyTorch's bf16 hook checks this only in the first backward
            raise InputError(f"ddp_comm_hook=bf16 needs NCCL (CUDA 11+, NCCL 2.10+), not {backend}: use fp16")
    model.register_comm_hook(state=None, hook=chosen)
    return str(chosen.__name__)


def settings(model: Any) -> dict[str, Any] | None:
    """The options DDP runs ``model`` with, read from it; None when DDP did not wrap it."""
    from torch.nn.parallel import DistributedDataParallel

    if not isinstance(model, DistributedDataParallel):
        return None
    return {
        "bucket_cap_mb": model.bucket_bytes_cap / _MIB,
        "gradient_as_bucket_view": bool(model.gradient_as_bucket_view),
        "find_unused_parameters": bool(model.find_unused_parameters),
    }


def no_effect(config: CaptureConfig, *, wrapped: bool, distributed: str) -> CaptureNote | None:
    """The note that the DDP options set in ``config`` did nothing, where DDP did not wrap the
    model (``wrapped`` false; ``distributed``: how the run was distributed instead, in
    accelerate's words: ``FSDP``, ``DEEPSPEED``, ``NO``)."""
    used = tuple(name for name, unset in OPTIONS.items() if getattr(config, name) != unset)
    if wrapped or not used:
        return None
    return CaptureNote(kind=CaptureNoteKind.DDP_OPTIONS_NO_EFFECT, items=used, value=distributed)
