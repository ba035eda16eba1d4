"""tracekit for a training loop on ``accelerate.Accelerator``: one call, then a marker per phase.

::

    from tracekit.integrations.accelerate import profile

    with profile(accelerator, out_dir="tk", warmup_steps=2, measured_steps=5) as tk:
        for batch in tk.loader(dataloader):                # dataload_wait
            with tk.phase("forward"):
                loss = model(batch).sum()
            with tk.phase("backward"):
                accelerator.backward(loss)
            with tk.phase("optim_step"):
                optimizer.step()
            with tk.phase("zero_grad"):
                optimizer.zero_grad()
            tk.step()                                       # end of one optimizer step
    # then: tracekit analyze tk

The phases are ``tracekit capture``'s (``dataload_wait``, ``h2d``, ``forward``, ``backward``,
``clip``, ``optim_step``, ``zero_grad``, ``sync``); each ``phase`` is optional, and time outside
them is the step's ``other``. Once the measured steps are done the files are written and the
marker does nothing: the loop trains on, unprofiled, to its own end.
"""

from __future__ import annotations

from typing import Any

from tracekit.integrations.marker import StepMarker, environment, make_config, summary_config


def profile(accelerator: Any, /, *, samples_per_step: int | None = None, **options: Any) -> StepMarker:
    """A :class:`~tracekit.integrations.marker.StepMarker` for this rank of ``accelerator``'s
    run: use it as a context manager (it starts profiling on entering, and writes the files
    once the measured steps are done, or on leaving). ``samples_per_step``: the samples one step
    of this rank trains on, for throughput. Options: those of :class:`tracekit.capture.Profiler`
    (``out_dir``, ``warmup_steps``, ``measured_steps``, ``wait`` / ``warmup`` / ``active``, ...)."""
    import accelerate

    config = make_config("tracekit.integrations.accelerate.profile", **options)
    world = int(accelerator.num_processes)
    return StepMarker(
        config,
        samples_per_step=samples_per_step,
        summary_extra={
            "config": summary_config(
                config,
                framework="accelerate.Accelerator",
                world_size=world,
                batch_size=samples_per_step,
                gradient_accumulation_steps=int(accelerator.gradient_accumulation_steps),
                mixed_precision=str(accelerator.mixed_precision),
            ),
            "environment": environment(
                framework="accelerate",
                version=accelerate.__version__,
                distributed_type=str(accelerator.distributed_type).split(".")[-1],
            ),
        },
    )
