"""tracekit for PyTorch Lightning: a ``lightning.Callback`` that captures like ``tracekit capture``.

::

    from tracekit.integrations.lightning import TracekitCallback

    trainer = lightning.Trainer(strategy="ddp", devices=2,
                                callbacks=[TracekitCallback(out_dir="tk", measured_steps=5)])
    trainer.fit(module, loader)       # one trace per rank; then: tracekit analyze tk

For the ``pytorch_lightning`` package, ``tracekit.integrations.lightning.callback_class(pytorch_lightning)``
gives the same callback on its ``Callback``.

A step is one optimizer step (with ``accumulate_grad_batches``, several batches); its phases, from
the hooks Lightning calls in automatic optimization:

- ``dataload_wait``: from one batch's ``on_train_batch_end`` to the next ``on_train_batch_start``:
  fetching the batch and moving it to the device, and what Lightning does between two batches
  (its per-batch logging; validation and checkpointing on the batches that run them).
- ``forward``: ``on_train_batch_start`` to ``on_before_zero_grad`` (or ``on_before_backward``):
  ``training_step``, the loss and ``self.log`` in it.
- ``zero_grad``: ``on_before_zero_grad`` to ``on_before_backward`` (Lightning zeroes the gradients
  after the forward).
- ``backward``: ``on_before_backward`` to ``on_after_backward``, with DDP's gradient all-reduce.
- ``optim_step``: ``on_before_optimizer_step`` to ``on_train_batch_end``: gradient clipping
  (Lightning clips after that hook), the optimizer's step and a per-step LR scheduler.

With manual optimization only the hooks Lightning still calls mark phases (backward through
``manual_backward``, the optimizer's step); the rest of ``training_step`` is ``forward``.
"""

from __future__ import annotations

from typing import Any

from tracekit.integrations.marker import StepMarker, ddp_type, environment, make_config, summary_config

#: Lightning strategies (by their ``strategy_name``'s start) that are not plain data parallel.
_KINDS = {"fsdp": "FSDP", "deepspeed": "DEEPSPEED"}


class _Hooks:
    """The hooks, on any Lightning ``Callback`` base (``lightning`` or ``pytorch_lightning``)."""

    #: The Lightning package whose ``Callback`` this class extends (set by :func:`callback_class`).
    _package: Any = None

    def __init__(self, **options: Any) -> None:
        self.config = make_config("TracekitCallback", **options)
        self.marker: StepMarker | None = None
        self._stepped = False

    def on_train_start(self, trainer: Any, _pl_module: Any) -> None:
        """Start profiling (the process group is up)."""
        world = int(trainer.world_size)
        accumulation = int(getattr(trainer, "accumulate_grad_batches", 1) or 1)
        batch = _batch_size(trainer)
        name = str(getattr(trainer.strategy, "strategy_name", "") or type(trainer.strategy).__name__).lower()
        kind = next((v for k, v in _KINDS.items() if name.startswith(k)), ddp_type(world))
        package = self._package
        self.marker = StepMarker(
            self.config,
            samples_per_step=batch * accumulation if batch is not None else None,
            summary_extra={
                "config": summary_config(
                    self.config,
                    framework=f"{package.__name__}.Trainer",
                    world_size=world,
                    batch_size=batch,
                    gradient_accumulation_steps=accumulation,
                ),
                "environment": environment(
                    framework=package.__name__, version=str(package.__version__), distributed_type=kind
                ),
            },
        )
        self.marker.begin()
        self.marker.switch("dataload_wait")

    def on_train_batch_start(self, trainer: Any, _pl_module: Any, batch: Any, _batch_idx: int) -> None:
        """The batch is on the device: ``training_step`` begins."""
        if self.marker is not None:
            self.marker.switch("forward")

    def on_before_zero_grad(self, trainer: Any, _pl_module: Any, optimizer: Any) -> None:
        """The forward is over; Lightning zeroes the gradients before backward."""
        if self.marker is not None:
            self.marker.switch("zero_grad")

    def on_before_backward(self, trainer: Any, _pl_module: Any, loss: Any) -> None:
        """Backward begins."""
        if self.marker is not None:
            self.marker.switch("backward")

    def on_after_backward(self, trainer: Any, _pl_module: Any) -> None:
        """Backward is over (what follows until the optimizer's step is ``other``)."""
        if self.marker is not None:
            self.marker.switch(None)

    def on_before_optimizer_step(self, trainer: Any, _pl_module: Any, optimizer: Any) -> None:
        """Clipping and the optimizer's step begin: this batch ends a step."""
        self._stepped = True
        if self.marker is not None:
            self.marker.switch("optim_step")

    def on_train_batch_end(self, trainer: Any, _pl_module: Any, outputs: Any, batch: Any, _batch_idx: int) -> None:
        """End the step if the optimizer stepped in this batch; the next fetch begins."""
        if self.marker is None:
            return
        if self._stepped:
            self._stepped = False
            self.marker.step()
        self.marker.switch("dataload_wait")

    def on_train_end(self, trainer: Any, _pl_module: Any) -> None:
        """Training ended (perhaps before the measured steps did): write what was profiled."""
        if self.marker is not None:
            self.marker.end()

    def on_exception(self, trainer: Any, _pl_module: Any, exception: BaseException) -> None:
        """Training failed: close the profiler, keeping the trace so far."""
        if self.marker is not None:
            self.marker.end(exception)


def _batch_size(trainer: Any) -> int | None:
    """The per-rank batch size of the training DataLoader, where Lightning tells it."""
    loader = getattr(trainer, "train_dataloader", None)
    size = getattr(loader, "batch_size", None)
    return size if isinstance(size, int) else None


def callback_class(package: Any) -> type:
    """The tracekit callback on ``package.Callback`` (``package``: the module ``lightning`` or
    ``pytorch_lightning``); its options are those of :class:`tracekit.capture.Profiler`."""
    namespace = {"__module__": __name__, "__doc__": _Hooks.__doc__, "_package": package}
    return type("TracekitCallback", (_Hooks, package.Callback), namespace)


def __getattr__(name: str) -> Any:
    if name == "TracekitCallback":  # built on first use: importing this module imports no Lightning
        import lightning

        cls = callback_class(lightning)
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
