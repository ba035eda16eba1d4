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

When the training raises or is interrupted (an error or Ctrl-C in a measured step), the callback
stops the profiler, keeps the trace of the steps profiled so far, removes its hooks and gives the
DataLoader its class back, then lets the error go on. The Trainer has no callback event for an
error, so the callback wraps the ``train`` method of its Trainer (found when the Trainer calls
``on_init_end``: the callback is in ``Trainer(callbacks=[...])``); one added later with
``trainer.add_callback`` wraps the Trainer's ``training_step`` and the DataLoader's fetches
instead, which is where a measured step spends its time.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Final

import transformers

from tracekit.integrations.marker import StepMarker, ddp_type, environment, make_config, summary_config

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import FrameType

    from transformers import TrainerControl, TrainerState, TrainingArguments

#: The phase after which the model's forward begins (the hooks ignore a forward anywhere else:
#: a checkpointed layer's forward run again in backward, an evaluation).
_BEFORE_FORWARD = frozenset({"h2d"})
#: How many frames up from a callback the Trainer calling it is looked for (the handler's
#: ``call_event`` and its event method lie between).
_FRAMES: Final = 8


class TracekitCallback(transformers.TrainerCallback):  # type: ignore[misc]  # Any to mypy: pyproject.toml
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
        #: Whether an error of the training reaches :meth:`_failed` (the Trainer's ``train`` or
        #: ``training_step`` is wrapped).
        self._guarded = False

    # -- the run ------------------------------------------------------------------
    def on_init_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        """The Trainer is built: wrap its ``train``, so that an error in it cleans up here."""
        trainer = _calling_trainer(self)
        if trainer is not None:
            _guard(trainer, "train", self._failed)
            self._guarded = True

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Start profiling (the process group is up) and hook the model's forward."""
        if not self._guarded:  # added after the Trainer was built: guard the step instead
            trainer = _calling_trainer(self)
            if trainer is not None:
                _guard(trainer, "training_step", self._failed)
                self._guarded = True
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
        self.marker.begin()  # first: an out_dir it refuses leaves nothing registered
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._hooks = [
            register_module_forward_pre_hook(self._forward_begins),
            register_module_forward_hook(self._forward_ends),
        ]
        loader = kwargs.get("train_dataloader")
        if loader is not None:
            self._loader = (loader, type(loader))
            _set_class(loader, _timed(type(loader), self.marker, self._failed))

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
        self._clean_up(None)

    def _failed(self, error: BaseException) -> None:
        """The training raised ``error`` (which goes on after this): stop profiling, keeping the
        trace so far, and remove what the callback registered."""
        self._clean_up(error)

    def _clean_up(self, error: BaseException | None) -> None:
        """Remove the hooks, give the DataLoader its class back and end the profiling (after
        ``error``: the trace so far is kept); each part also when another fails."""
        hooks, self._hooks = self._hooks, []
        loader, self._loader = self._loader, None
        try:
            for hook in hooks:
                hook.remove()
            if loader is not None:
                _set_class(*loader)
        finally:
            if self.marker is not None:
                self.marker.end(error)

    # -- the model's forward ---------------------------------------------------------
    def _forward_begins(self, *_args: Any) -> None:
        self._depth += 1
        if self._depth == 1 and self.marker is not None and self.marker.current in _BEFORE_FORWARD:
            self.marker.switch("forward")

    def _forward_ends(self, *_args: Any) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0 and self.marker is not None and self.marker.current == "forward":
            self.marker.switch("backward")


def _timed(cls: type, marker: StepMarker, failed: Callable[[BaseException], None]) -> type:
    """``cls`` (a DataLoader's class) whose iteration times each fetch as ``dataload_wait``
    (``failed`` is told of an error in a fetch, before it goes on)."""
    iterate: Any = cls.__iter__  # type: ignore[attr-defined]

    def fetches(loader: Any) -> Iterator[Any]:
        try:
            yield from marker.loader(iterate(loader))
        except GeneratorExit:  # the Trainer stopped iterating: not an error
            raise
        except BaseException as error:
            failed(error)
            raise

    def __iter__(self: Any) -> Any:
        return fetches(self)

    return type(cls.__name__, (cls,), {"__iter__": __iter__, "__module__": cls.__module__})


def _set_class(obj: Any, cls: type) -> None:
    """Set ``obj``'s class through ``object``'s own descriptor: accelerate's ``DataLoaderShard``
    shadows ``__class__`` with a read-only property."""
    object.__dict__["__class__"].__set__(obj, cls)


def _calling_trainer(callback: TracekitCallback) -> transformers.Trainer | None:
    """The Trainer whose callback handler is calling ``callback`` now (from the call's frames)."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(_FRAMES):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if isinstance(owner, transformers.Trainer):
            handler = getattr(owner, "callback_handler", None)
            return owner if callback in getattr(handler, "callbacks", ()) else None
        frame = frame.f_back
    return None


def _guard(trainer: transformers.Trainer, name: str, failed: Callable[[BaseException], None]) -> None:
    """Wrap ``trainer``'s method ``name`` (on the instance): an error in it is told to ``failed``
    before it goes on."""
    method = getattr(trainer, name)

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except BaseException as error:
            failed(error)
            raise

    setattr(trainer, name, guarded)
