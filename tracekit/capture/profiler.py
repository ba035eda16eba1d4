"""The user-facing profiler: phases, steps, traces and phase timings for one rank.

``tracekit capture`` runs its step loop on this class, and users who keep their own
training script use it directly::

    from tracekit.capture import Profiler

    with Profiler(out_dir="traces", warmup_steps=2, measured_steps=5) as prof:
        for batch in prof.loader(dataloader):          # times `dataload_wait`
            with prof.phase("forward"):
                loss = model(batch).sum()
            with prof.phase("backward"):
                loss.backward()
            with prof.phase("optim_step"):
                optimizer.step()
            if not prof.step():                           # False once the last step is done
                break

Each phase is an NVTX range (domain ``tracekit``, visible to Nsight Systems) and a
``record_function`` named ``tracekit.phase/<name>`` (visible in the Kineto trace). Host
time of each phase is measured per step; the device is synchronized only at step
boundaries, so the wait for the GPU at the end of a step is its own part, ``device_sync``.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tracekit.capture import files

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from types import TracebackType

T = TypeVar("T")

#: The phases of a training step, in order. ``device_sync`` is the host's wait for the
#: device at the step boundary; ``other`` is host time outside every phase.
PHASES = ("dataload_wait", "h2d", "forward", "backward", "clip", "optim_step", "zero_grad", "sync")
DEVICE_SYNC = "device_sync"
OTHER = "other"
NVTX_DOMAIN = "tracekit"
PHASE_PREFIX = "tracekit.phase/"


@dataclass
class _StepRecord:
    step: int
    start_ns: int
    phases: dict[str, int] = field(default_factory=dict)
    nvtx_range: Any = None


def _dist() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


#: What ``summary_extra`` may hold: stored in summary.json as given.
SUMMARY_EXTRA_KEYS = frozenset({"config", "environment", "notes"})


class Profiler:
    """Profile one rank: torch.profiler on a schedule, NVTX + record_function phases,
    host phase timings per step, peak memory, and files other tracekit tools read.

    Writes ``rank{r}.pt.trace.json.gz`` and ``phases.rank{r}.json`` into ``out_dir``;
    rank 0 writes ``summary.json`` once every rank has finished (``write_summary``).
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        warmup_steps: int = 2,
        measured_steps: int = 5,
        wait: int = 1,
        warmup: int = 1,
        active: int = 3,
        repeat: int = 1,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        nvtx: bool = True,
        cuda_profiler_range: bool = False,
        samples_per_step: int | None = None,
        write_summary: bool = True,
        summary_extra: dict[str, Any] | None = None,
        progress: Callable[[int, str], None] | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.warmup_steps = warmup_steps
        self.measured_steps = measured_steps
        self.schedule = (wait, warmup, active, repeat)
        self.options = {"record_shapes": record_shapes, "profile_memory": profile_memory, "with_stack": with_stack}
        self.nvtx = nvtx
        self.cuda_profiler_range = cuda_profiler_range
        self.samples_per_step = samples_per_step
        self.write_summary = write_summary
        unknown = sorted(set(summary_extra or {}) - SUMMARY_EXTRA_KEYS)
        if unknown:
            raise TypeError(f"summary_extra: unknown key(s) {', '.join(unknown)} (known: config, environment, notes)")
        self.summary_extra = summary_extra or {}
        #: Called with (step, phase) as each phase begins, before it is timed.
        self.progress = progress
        self.rank, self.world_size = 0, 1
        self._records: list[_StepRecord] = []
        self._current: _StepRecord | None = None
        self._step = 0
        self._torch_profiler: Any = None
        self._cycle = 0
        self._cuda = False
        self._nvtx_domain: Any = None
        self._peak: dict[str, int] = {}
        self._profiling_cuda_range = False

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> Profiler:
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        self.rank, self.world_size = _dist()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._cuda = torch.cuda.is_available()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self._cuda else [])
        wait, warmup, active, repeat = self.schedule
        self._torch_profiler = profile(
            activities=activities,
            schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
            on_trace_ready=self._write_trace,
            record_shapes=self.options["record_shapes"],
            profile_memory=self.options["profile_memory"],
            with_stack=self.options["with_stack"],
        )
        if self.nvtx:
            self._nvtx_domain = _nvtx_domain()
        self._torch_profiler.__enter__()
        self._begin_step()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end_step_range(self._current)
        self._current = None  # a step left open by an exception is not recorded
        self._set_cuda_range(False)
        self._torch_profiler.__exit__(exc_type, exc, tb)
        if exc_type is None:
            self._finish()

    # -- phases and steps ----------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time ``name`` on the host and mark it for torch.profiler and Nsight Systems."""
        from torch.profiler import record_function

        if self.progress is not None:
            self.progress(self._step, name)
        nvtx_range = self._nvtx_domain.start_range(message=name) if self._nvtx_domain is not None else None
        start = time.perf_counter_ns()
        try:
            with record_function(PHASE_PREFIX + name):
                yield
        finally:
            elapsed = time.perf_counter_ns() - start
            if nvtx_range is not None:
                self._nvtx_domain.end_range(nvtx_range)
            if self._current is not None:
                self._current.phases[name] = self._current.phases.get(name, 0) + elapsed

    def loader(self, iterable: Iterable[T]) -> Iterator[T]:
        """Iterate ``iterable`` (a DataLoader), timing each fetch as ``dataload_wait``."""
        iterator = iter(iterable)
        while True:
            with self.phase("dataload_wait"):
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item

    @property
    def done(self) -> bool:
        """Whether warmup and measured steps have all run."""
        return self._step >= self.warmup_steps + self.measured_steps

    def step(self) -> bool:
        """End a step: wait for the device, record timings, advance the profiler.

        Returns False once all warmup and measured steps have run.
        """
        if self._current is not None:
            sync_start = time.perf_counter_ns()
            self._synchronize()
            now = time.perf_counter_ns()
            record = self._current
            record.phases[DEVICE_SYNC] = now - sync_start
            record.phases[OTHER] = max(0, now - record.start_ns - sum(record.phases.values()))
            self._end_step_range(record)
            if self._step >= self.warmup_steps:
                self._records.append(record)
        self._step += 1
        self._torch_profiler.step()
        if self._step == self.warmup_steps:
            self._reset_peak_memory()
        self._set_cuda_range(self._in_active_window())
        if self.done:
            self._current = None
            return False
        self._begin_step()
        return True

    # -- internals ---------------------------------------------------------------------
    def _begin_step(self) -> None:
        # an NVTX range per step (Nsight Systems has no ProfilerStep#N): read back as a step
        nvtx_range = self._nvtx_domain.start_range(message=f"step#{self._step}") if self._nvtx_domain else None
        self._current = _StepRecord(step=self._step, start_ns=time.perf_counter_ns(), nvtx_range=nvtx_range)

    def _end_step_range(self, record: _StepRecord | None) -> None:
        if record is not None and record.nvtx_range is not None:
            self._nvtx_domain.end_range(record.nvtx_range)
            record.nvtx_range = None

    def _in_active_window(self) -> bool:
        wait, warmup, active, repeat = self.schedule
        cycle = wait + warmup + active
        return self._step < cycle * repeat and self._step % cycle >= wait + warmup

    def _set_cuda_range(self, on: bool) -> None:
        """Bracket the profiled steps with cudaProfilerStart/Stop (for ``nsys --capture-range``)."""
        if not (self.cuda_profiler_range and self._cuda) or on == self._profiling_cuda_range:
            return
        import torch

        if on:
            torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
        else:
            torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
        self._profiling_cuda_range = on

    def _synchronize(self) -> None:
        if self._cuda:
            import torch

            torch.cuda.synchronize()

    def _reset_peak_memory(self) -> None:
        if self._cuda:
            import torch

            torch.cuda.reset_peak_memory_stats()

    def _memory(self) -> dict[str, Any]:
        if self._cuda:
            import torch

            return {
                "device": "cuda",
                "peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
                "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
                "scope": "measured steps",
            }
        rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        scale = 1 if sys.platform == "darwin" else 1024
        return {"device": "cpu", "peak_rss_bytes": int(rss_kb * scale), "scope": "whole process"}

    def _write_trace(self, prof: Any) -> None:
        _wait, _warmup, _active, repeat = self.schedule
        folder = self.out_dir if repeat == 1 else self.out_dir / f"cycle{self._cycle}"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".rank{self.rank}.{os.getpid()}.json"
        prof.export_chrome_trace(str(tmp))
        files.gzip_atomic(tmp, folder / files.trace_name(self.rank))
        self._cycle += 1

    def _finish(self) -> None:
        from tracekit.capture.summary import write_summary

        files.write_json_atomic(self.out_dir / files.phases_name(self.rank), self.phase_record())
        if not self.write_summary:
            return
        if self.world_size > 1:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.barrier()
        if self.rank == 0:
            write_summary(self.out_dir, **self.summary_extra)

    def phase_record(self) -> dict[str, Any]:
        """This rank's measured steps and memory, as written to ``phases.rank{r}.json``."""
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "samples_per_step": self.samples_per_step,
            "warmup_steps": self.warmup_steps,
            "steps": [
                {"step": r.step, "step_ns": sum(r.phases.values()), "phases_ns": r.phases} for r in self._records
            ],
            "memory": self._memory(),
        }


def _nvtx_domain() -> Any:
    """The ``tracekit`` NVTX domain, or None when the nvtx package is missing."""
    try:
        import nvtx
    except ImportError:
        return None
    return nvtx.get_domain(NVTX_DOMAIN)
