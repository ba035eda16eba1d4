"""Configs that cannot be what the user meant (issue 46): each a one-line warning before the
ranks start, the capture going on as configured.

==========================  ==================================================================
what                        why it is not what was meant
==========================  ==================================================================
a straggler outside          ``workload_args.straggler_rank`` names no rank of ``nproc``: no
the world                    rank is made late, and the capture has no straggler to find
a batch over the dataset     a built-in workload's ``samples`` (given or its default) leave each
                             rank fewer samples than one batch: every step is the same few
more DataLoader workers      ``num_workers`` x ``nproc`` worker processes on fewer CPU cores:
than cores                   they take turns, and the wait for data is the machine's
==========================  ==================================================================
"""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING

from tracekit.capture.workloads import BUILTIN

if TYPE_CHECKING:
    from tracekit.capture.config import CaptureConfig

__all__ = ["ConfigWarning", "implausible"]


class ConfigWarning(UserWarning):
    """A config that runs but cannot be what was meant (shown as one ``tracekit: warning:`` line)."""


def _cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _samples(config: CaptureConfig) -> int | None:
    """A built-in workload's dataset size: its ``samples`` argument, or its default."""
    factory = BUILTIN.get(config.workload)
    if factory is None:
        return None
    given = config.workload_args.get("samples")
    if given is not None:
        return given if isinstance(given, int) and not isinstance(given, bool) else None
    default = inspect.signature(factory).parameters.get("samples")
    return default.default if default is not None and isinstance(default.default, int) else None


def implausible(config: CaptureConfig, *, cores: int | None = None) -> list[str]:
    """What in ``config`` cannot be what was meant, one sentence each (none: nothing)."""
    out = []
    ranks = config.nproc
    straggler = config.workload_args.get("straggler_rank")
    if isinstance(straggler, int) and not isinstance(straggler, bool) and not 0 <= straggler < ranks:
        out.append(
            f"workload_args.straggler_rank {straggler} is outside the {ranks} rank(s) (0-{ranks - 1}): "
            "no rank is made late"
        )
    samples = _samples(config)
    if samples is not None and samples // ranks < config.batch_size:
        out.append(
            f"batch_size {config.batch_size} is more than each rank's share of the dataset ({samples} samples / "
            f"{ranks} rank(s) = {samples // ranks}): every step reads the same few samples"
        )
    cores = cores if cores is not None else _cores()
    workers = config.num_workers * ranks
    if cores is not None and workers > cores:
        out.append(
            f"num_workers {config.num_workers} x {ranks} rank(s) = {workers} DataLoader worker processes on {cores} "
            "CPU core(s): they take turns, and the wait for data is this machine's"
        )
    return out
