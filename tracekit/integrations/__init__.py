"""tracekit inside the training frameworks people run: the Hugging Face ``Trainer``, PyTorch
Lightning and loops on ``accelerate.Accelerator``. Each captures as ``tracekit capture`` does
(the same phases, schedule and files), so ``tracekit analyze OUT_DIR`` reads its folder.

- :class:`tracekit.integrations.transformers.TracekitCallback`: a ``transformers.TrainerCallback``;
- :class:`tracekit.integrations.lightning.TracekitCallback`: a ``lightning.Callback``;
- :func:`tracekit.integrations.accelerate.profile`: one call around an accelerate loop.

Exported here lazily: importing :mod:`tracekit.integrations` imports no framework (nor torch).
See docs/integrations.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracekit.lazy import lazy_exports

if TYPE_CHECKING:
    from tracekit.integrations.accelerate import profile as profile_accelerate
    from tracekit.integrations.marker import StepMarker

__all__ = ["LightningCallback", "StepMarker", "TrainerCallback", "profile_accelerate"]

#: name -> (module, attribute)
_WHERE = {
    "TrainerCallback": ("transformers", "TracekitCallback"),
    "LightningCallback": ("lightning", "TracekitCallback"),
    "profile_accelerate": ("accelerate", "profile"),
    "StepMarker": ("marker", "StepMarker"),
}


__getattr__ = lazy_exports(__name__, _WHERE, globals())
