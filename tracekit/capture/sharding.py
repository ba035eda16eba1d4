"""FSDP on CPU: what accelerate does on a GPU, done by tracekit where accelerate does not.

``accelerate launch --config_file fsdp.yaml`` turns the config into environment variables
(``ACCELERATE_USE_FSDP``, ``FSDP_VERSION``, ``FSDP_SHARDING_STRATEGY`` ...), and on a GPU
``Accelerator.prepare`` wraps the model from them. On CPU ``Accelerator(cpu=True)`` runs as
``MULTI_CPU`` and leaves FSDP off (its FSDP path is for accelerators): the model would be
wrapped in DDP instead. So on CPU the runner wraps the model here, with the plugin accelerate
reads from the same environment: FSDP1 (``FullyShardedDataParallel`` on the CPU device, the
config's sharding strategy, auto-wrap policy, prefetch and ``use_orig_params``) or FSDP2
(``fully_shard`` on the modules the auto-wrap policy picks, then the root), and points the
optimizer at the sharded parameters. Only the model's wrapping differs from a GPU run;
the optimizer, data loader and step loop still go through accelerate.
"""

from __future__ import annotations

import os
from typing import Any, Final

from tracekit.results.capture import CaptureNote
from tracekit.results.vocab import CaptureNoteKind

__all__ = ["shard", "wanted"]

#: Prefixes FSDP1 and activation checkpointing add to parameter names.
_WRAPPER_PREFIXES: Final = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")


def wanted(cuda: bool) -> bool:
    """Whether the launcher asked for FSDP and accelerate will not apply it (no GPU)."""
    return not cuda and os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"


def _clean(name: str) -> str:
    for prefix in _WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def shard(model: Any, optimizer: Any) -> tuple[Any, CaptureNote]:
    """``model`` sharded as the FSDP config in the environment says, on CPU, with
    ``optimizer``'s parameters switched to the sharded ones; and the note of what was applied."""
    import torch
    from accelerate.utils import FullyShardedDataParallelPlugin

    plugin = FullyShardedDataParallelPlugin()  # from the environment accelerate launch set
    names = {id(p): _clean(n) for n, p in model.named_parameters()}
    if plugin.fsdp_version == 2:
        from accelerate.utils.fsdp_utils import fsdp2_prepare_auto_wrap_policy
        from torch.distributed.fsdp import fully_shard

        plugin.set_auto_wrap_policy(model)
        policy = fsdp2_prepare_auto_wrap_policy(plugin, model)
        reshard = bool(plugin.reshard_after_forward)
        for module in reversed(list(model.modules())[1:]):  # innermost first, as FSDP2 wants
            if policy is not None and policy(module):
                fully_shard(module, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        wrapped, what = model, CaptureNote(kind=CaptureNoteKind.FSDP2_ON_CPU, value=str(reshard))
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel

        if not plugin.use_orig_params:
            raise ValueError("FSDP on CPU under tracekit needs fsdp_use_orig_params: true in the accelerate config")
        plugin.set_auto_wrap_policy(model)
        wrapped = FullyShardedDataParallel(
            model,
            sharding_strategy=plugin.sharding_strategy,
            auto_wrap_policy=plugin.auto_wrap_policy,
            backward_prefetch=plugin.backward_prefetch,
            forward_prefetch=plugin.forward_prefetch,
            use_orig_params=True,
            limit_all_gathers=plugin.limit_all_gathers,
            device_id=torch.device("cpu"),
        )
        what = CaptureNote(kind=CaptureNoteKind.FSDP_ON_CPU, value=plugin.sharding_strategy.name)
    sharded = {_clean(n): p for n, p in wrapped.named_parameters()}
    for group in optimizer.param_groups:
        group["params"] = [sharded[names[id(p)]] for p in group["params"]]
    return wrapped, what
