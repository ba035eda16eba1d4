"""The machinery every integration shares: a :class:`~tracekit.capture.Profiler` driven from a
framework's hooks rather than from ``with`` blocks around each phase.

A framework calls its hooks *between* the phases of a step, not around them, so
:class:`StepMarker` keeps at most one phase open and :meth:`StepMarker.switch` closes it and opens
the next: the phases are ``tracekit capture``'s own (:data:`tracekit.capture.PHASES`, the ranges
``tracekit.phase/<name>`` of :data:`tracekit.capture.profiler.PHASE_PREFIX`), timed and traced by
the same Profiler, on the same schedule (``warmup_steps``, ``measured_steps``, torch.profiler's
``wait`` / ``warmup`` / ``active`` / ``repeat``), into the same files (``rank{r}.pt.trace.json.gz``,
``phases.rank{r}.json``, ``summary.json``), so ``tracekit analyze OUT_DIR`` reads the folder as a
capture's. Host time no phase covers is the step's ``other``.

Once the measured steps are done the Profiler is closed and its files written (every rank at the
same step: rank 0 writes ``summary.json`` after a barrier), and the marker does nothing more:
training goes on unprofiled.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, Final

from tracekit.capture.config import PROFILER_FIELDS, build_config, profiler_config, to_dict
from tracekit.capture.profiler import PHASES, Profiler

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from types import TracebackType

    from tracekit.capture.config import CaptureConfig

#: The out_dir an integration writes into when none is given.
DEFAULT_OUT_DIR: Final = "tracekit-capture"


def make_config(source: str, /, **options: Any) -> CaptureConfig:
    """The capture config of ``options`` (any option ``Profiler`` takes by keyword), checked as
    ``tracekit capture`` checks its config (a schedule longer than the steps is an
    :class:`~tracekit.errors.InputError` naming ``source``); a misspelt option is a ``TypeError``."""
    options.setdefault("out_dir", DEFAULT_OUT_DIR)
    return build_config(to_dict(profiler_config(None, **options)), source=source)


def summary_config(config: CaptureConfig, *, framework: str, world_size: int, **known: Any) -> dict[str, Any]:
    """What summary.json's ``config`` records of an integration's run: the profiling options, the
    framework as the workload, the ranks, and what the framework told (``batch_size``, ...)."""
    data = to_dict(config)
    out = {k: data[k] for k in PROFILER_FIELDS} | {"profiler": data["profiler"]}
    return out | {"workload": framework, "nproc": world_size} | {k: v for k, v in known.items() if v is not None}


def environment(*, framework: str, version: str, distributed_type: str | None) -> dict[str, Any]:
    """Versions, devices and the distributed setup, for summary.json (the keys ``tracekit
    capture`` writes, so analyze reads the run's kind and its ranks over cores alike)."""
    import torch
    import torch.distributed as dist

    from tracekit.capture.runner import alloc_conf, cpu_count  # with torch: importing this module imports neither

    cuda = torch.cuda.is_available()
    initialized = dist.is_available() and dist.is_initialized()
    return {
        "torch": str(torch.__version__),
        framework: version,
        "cuda": torch.version.cuda if cuda else None,
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else ["cpu"],
        "backend": str(dist.get_backend()) if initialized else None,
        "world_size": dist.get_world_size() if initialized else 1,
        "distributed_type": distributed_type,
        "python": sys.version.split()[0],
        "cpu_count": cpu_count(),
        "alloc_conf": alloc_conf(),
    }


def ddp_type(world_size: int) -> str:
    """accelerate's name of a data-parallel run over ``world_size`` processes on this device."""
    import torch

    if world_size <= 1:
        return "NO"
    return "MULTI_GPU" if torch.cuda.is_available() else "MULTI_CPU"


class StepMarker:
    """Marks the phases and steps of a training loop for one rank, from outside the loop.

    ``begin()`` once the process group is up (the rank is read then), :meth:`switch` at each
    phase boundary, :meth:`step` at each step's end, :meth:`end` when training ends (it is a
    no-op once the measured steps have written their files). Each method is a no-op while the
    marker is not profiling, so hooks may call them unconditionally.
    """

    def __init__(
        self,
        config: CaptureConfig,
        /,
        *,
        samples_per_step: int | None = None,
        summary_extra: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.samples_per_step = samples_per_step
        self.summary_extra = summary_extra or {}
        #: The phase open now, or None.
        self.current: str | None = None
        self._profiler: Profiler | None = None
        self._open: contextlib.AbstractContextManager[None] | None = None
        self._ended = False

    @property
    def active(self) -> bool:
        """Whether the marker is profiling: begun, and its measured steps not all done."""
        return self._profiler is not None and not self._ended

    @property
    def ended(self) -> bool:
        """Whether the profiling is over and its files written."""
        return self._ended

    @property
    def rank(self) -> int:
        """This process's rank (0 before :meth:`begin`)."""
        return self._profiler.rank if self._profiler is not None else 0

    def begin(self) -> None:
        """Start profiling: the Profiler's first step begins now (once; later calls do nothing)."""
        if self._profiler is not None or self._ended:
            return
        profiler = Profiler(self.config, samples_per_step=self.samples_per_step, summary_extra=self.summary_extra)
        profiler.__enter__()
        self._profiler = profiler

    def switch(self, phase: str | None) -> None:
        """Close the open phase and open ``phase`` (None: leave none open)."""
        self.close()
        if phase is None or not self.active:
            return
        assert self._profiler is not None
        opened = self._profiler.phase(phase)
        opened.__enter__()
        self._open, self.current = opened, phase

    def close(self) -> None:
        """Close the open phase, if any."""
        opened, self._open, self.current = self._open, None, None
        if opened is not None:
            opened.__exit__(None, None, None)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """A ``with`` block timed as phase ``name`` (nothing once the profiling is over)."""
        self.switch(name)
        try:
            yield
        finally:
            if self.current == name:
                self.close()

    def loader(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """Iterate ``iterable`` (a DataLoader), each fetch timed as ``dataload_wait``."""
        iterator = iter(iterable)
        while True:
            with self.phase(PHASES[0]):
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item

    def step(self) -> bool:
        """End a step. Returns whether profiling goes on; after the last measured step the
        Profiler is closed and its files written (every rank must reach this at the same step)."""
        self.close()
        if not self.active:
            return False
        assert self._profiler is not None
        if self._profiler.step():
            return True
        self.end()
        return False

    def end(self, error: BaseException | None = None) -> None:
        """Stop profiling and write the files (not the phase timings and summary after an
        ``error``: the trace so far is kept). A no-op once ended."""
        self.close()
        profiler, self._profiler = self._profiler, None
        if profiler is None or self._ended:
            return
        self._ended = True
        if error is None:
            profiler.__exit__(None, None, None)
        else:
            profiler.__exit__(type(error), error, error.__traceback__)

    def __enter__(self) -> StepMarker:
        self.begin()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(exc)
