"""tracekit for the Hugging Face ``Trainer``: a ``TrainerCallback`` that captures like ``tracekit capture``.

::

    from tracekit.integrations.transformers import TracekitCallback

    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[TracekitCallback(out_dir="tk", warmup_steps=2, measured_steps=5)])
    trainer.train()          # under torchrun or accelerate launch: one trace per rank
    # then: tracekit analyze tk

A step is one optimizer step (``state.global_step``); its phases, from the hooks the Trainer calls
and hooks on the model's forward:

- ``dataload_wait``: each fetch from the training DataLoader (the Trainer fetches a step's
  micro-batches before ``on_step_begin``). The callback times it by iterating the DataLoader the
  Trainer gives the callbacks through a subclass of its own class (restored at
  ``on_train_end``). The rest of the gap between two steps (logging, saving, evaluating, the
  all-gather of the batch's token count) is ``other``.
- ``h2d``: from ``on_step_begin`` (or ``on_substep_end``) to the model's forward: moving the batch
  to the device.
- ``forward``: the outermost module's ``forward`` (the DDP wrapper's, when there is one): global
  forward hooks (``torch.nn.modules.module.register_module_forward_pre_hook``), registered
  while profiling only; they cost a Python call per module call.
- ``backward``: from the end of the forward to ``on_pre_optimizer_step``: the loss where the
  Trainer computes it outside the model, backward with DDP's gradient all-reduce, and gradient
  clipping (the Trainer clips before ``on_pre_optimizer_step``: no separate ``clip``).
- ``optim_step``: ``on_pre_optimizer_step`` to ``on_optimizer_step``.
- ``zero_grad``: ``on_optimizer_step`` to ``on_step_end``: the learning-rate scheduler and
  ``model.zero_grad()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import transformers

from tracekit.integrations.marker import StepMarker, ddp_type, environment, make_config, summary_config

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

#: The phase after which the model's forward begins (the hooks ignore a forward anywhere else:
#: a checkpointed layer's forward run again in backward, an evaluation).
_BEFORE_FORWARD = frozenset({"h2d"})


class TracekitCallback(transformers.TrainerCallback):
    """Profile a ``Trainer``'s steps as ``tracekit capture`` does (see the module's text).

    Options: those of :class:`tracekit.capture.Profiler` (``out_dir``, ``warmup_steps``,
    ``measured_steps``, ``wait`` / ``warmup`` / ``active`` / ``repeat``, ``record_shapes``, ...);
    a schedule longer than the steps is an :class:`~tracekit.errors.InputError` here.
    """

    def __init__(self, **options: Any) -> None:
        self.config = make_config("TracekitCallback", **options)
        self.marker: StepMarker | None = None
        self._hooks: list[Any] = []
        self._loader: tuple[Any, type] | None = None
        #: Module calls open now (the outermost one is the forward).
        self._depth = 0

    # -- the run ------------------------------------------------------------------
    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Start profiling (the process group is up) and hook the model's forward."""
        world = int(args.world_size)
        accumulation = int(args.gradient_accumulation_steps)
        batch = int(args.per_device_train_batch_size)
        trainer_type = getattr(getattr(args, "distributed_state", None), "distributed_type", None)
        kind = str(trainer_type).split(".")[-1] if trainer_type is not None else ddp_type(world)
        self.marker = StepMarker(
            self.config,
            samples_per_step=batch * accumulation,
            summary_extra={
                "config": summary_config(
                    self.config,
                    framework="transformers.Trainer",
                    world_size=world,
                    batch_size=batch,
                    gradient_accumulation_steps=accumulation,
                ),
                "environment": environment(
                    framework="transformers", version=transformers.__version__, distributed_type=kind
                ),
            },
        )
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._hooks = [
            register_module_forward_pre_hook(self._forward_begins),
            register_module_forward_hook(self._forward_ends),
        ]
        loader = kwargs.get("train_dataloader")
        if loader is not None:
            self._loader = (loader, type(loader))
            _set_class(loader, _timed(type(loader), self.marker))
        self.marker.begin()

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """The step's batches are fetched: moving the first to the device begins."""
        self._depth = 0
        if self.marker is not None:
            self.marker.switch("h2d")

    def on_substep_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """A micro-batch's backward is over (gradient accumulation): the next one's ``h2d`` begins."""
        if self.marker is not None:
            self.marker.switch("h2d")

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Backward (and clipping) are over."""
        if self.marker is not None:
            self.marker.switch("optim_step")

    def on_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """The optimizer has stepped: the scheduler and zero_grad follow."""
        if self.marker is not None:
            self.marker.switch("zero_grad")

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """End the step (the fetches of the next one are timed as they happen)."""
        if self.marker is not None:
            self.marker.step()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Training ended (perhaps before the measured steps did): write what was profiled."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        if self._loader is not None:
            loader, cls = self._loader
            _set_class(loader, cls)
            self._loader = None
        if self.marker is not None:
            self.marker.end()

    # -- the model's forward ---------------------------------------------------------
    def _forward_begins(self, *_args: Any) -> None:
        self._depth += 1
        if self._depth == 1 and self.marker is not None and self.marker.current in _BEFORE_FORWARD:
            self.marker.switch("forward")

    def _forward_ends(self, *_args: Any) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and self.marker is not None and self.marker.current == "forward":
            self.marker.switch("backward")


def _timed(cls: type, marker: StepMarker) -> type:
    """``cls`` (a DataLoader's class) whose iteration times each fetch as ``dataload_wait``."""
    iterate: Any = cls.__iter__  # type: ignore[attr-defined]

    def __iter__(self: Any) -> Any:
        return marker.loader(iterate(self))

    return type(cls.__name__, (cls,), {"__iter__": __iter__, "__module__": cls.__module__})


def _set_class(obj: Any, cls: type) -> None:
    """Set ``obj``'s class through ``object``'s own descriptor: accelerate's ``DataLoaderShard``
    shadows ``__class__`` with a read-only property."""
    object.__dict__["__class__"].__set__(obj, cls)
