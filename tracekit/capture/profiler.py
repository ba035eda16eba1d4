"""The user-facing profiler: phases, steps, traces and phase timings for one rank.

``tracekit capture`` runs its step loop on this class, built from the capture's config
(``Profiler(config)``), and users who keep their own training script use it directly, with
the options of that config as keywords::

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

Memory is sampled at every phase boundary of every step (device memory allocated and
reserved on CUDA, the process's resident set on CPU: :mod:`tracekit.capture.memory`), so
what each phase adds or frees is measured; what changes outside every phase is ``other``'s.
Autograd's saved tensors are counted during ``forward`` of measured steps (the activation
proxy), and the device's peak statistics are reset where the measured steps begin. Optionally
the profiler's categorized memory timeline (``memory_timeline``) and the CUDA allocator's
snapshot over the measured steps (``memory_snapshot``) are written beside the trace.
Phases do not nest: a phase inside another counts its time and memory twice.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec

from tracekit.capture import files, memory, outdir, processes
from tracekit.capture.config import profiler_config
from tracekit.capture.summary import write_summary
from tracekit.errors import InputError
from tracekit.locks import folder_lock
from tracekit.results.capture import CaptureNote
from tracekit.results.vocab import CAPTURE_SYNC_RANGE, CaptureNoteKind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from types import TracebackType

    from tracekit.capture.config import CaptureConfig

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
    #: the process's CPU time at the step's start (every thread of this rank's process)
    cpu_start_ns: int = 0
    #: the CPU time the process used over the step (its threads together; not its DataLoader workers)
    cpu_ns: int | None = None
    phases: dict[str, int] = field(default_factory=dict)
    nvtx_range: Any = None
    memory_start: dict[str, int] = field(default_factory=dict)
    memory_end: dict[str, int] = field(default_factory=dict)
    #: Per phase: memory at its first start, at its last end, and the sum of its changes.
    phase_memory: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    #: The largest of the step's forward passes (several with gradient accumulation).
    saved_tensor_bytes: int | None = None

    def add_memory(self, name: str, start: dict[str, int], end: dict[str, int]) -> None:
        change = memory.delta(start, end)
        entry = self.phase_memory.get(name)
        if entry is None:
            self.phase_memory[name] = {"start": start, "end": end, "delta": change}
        else:
            entry["end"] = end
            entry["delta"] = {k: entry["delta"].get(k, 0) + v for k, v in change.items()}

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "step_ns": sum(self.phases.values()), "phases_ns": self.phases}
        if self.cpu_ns is not None:
            out["cpu_ns"] = self.cpu_ns
        if self.memory_start and self.memory_end:
            out |= {"memory_start": self.memory_start, "memory_end": self.memory_end, "phase_memory": self.phase_memory}
        if self.saved_tensor_bytes is not None:
            out["saved_tensor_bytes"] = self.saved_tensor_bytes
        return out


def _dist() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


#: A phase starting this soon after the previous one's end sample reuses it (see ``_sample``).
SAMPLE_REUSE_NS: Final = 50_000
#: What ``summary_extra`` may hold: stored in summary.json as given.
SUMMARY_EXTRA_KEYS = frozenset({"config", "environment", "notes"})


class Profiler:
    """Profile one rank: torch.profiler on a schedule, NVTX + record_function phases,
    host phase timings and memory per step, peak memory, and files other tracekit tools read.

    Its options are those of a capture's config (:class:`~tracekit.capture.config.CaptureConfig`):
    ``Profiler(config)``, or keywords (:func:`~tracekit.capture.config.profiler_config`: ``out_dir``, ``warmup_steps``,
    ``measured_steps``, ProfilerConfig's schedule ``wait`` / ``warmup`` / ``active`` / ``repeat``
    and ``record_shapes`` / ``profile_memory`` / ``with_stack``, ``memory_timeline``,
    ``memory_snapshot``, ``memory_saved_tensors``, ``nvtx``, ``trace``, ``nsys``), which also
    override a config given.

    Writes ``rank{r}.pt.trace.json.gz`` and ``phases.rank{r}.json`` into ``out_dir``;
    rank 0 writes ``summary.json`` once every rank has finished (``write_summary``).
    ``memory_timeline`` also writes ``memory_timeline.rank{r}.raw.json.gz`` beside each trace
    (it turns on ``record_shapes``, ``profile_memory`` and ``with_stack``, which it needs);
    ``memory_snapshot`` writes ``memory_snapshot.rank{r}.pickle`` (CUDA only; on CPU a note
    says so). ``memory_saved_tensors=False`` leaves autograd's saved-tensor hooks out of forward.
    ``nsys`` brackets the traced steps with cudaProfilerStart/Stop (for ``nsys
    --capture-range=cudaProfilerApi``). ``samples_per_step``: the samples one step of this rank
    trains on, for throughput.
    """

    def __init__(
        self,
        config: CaptureConfig | None = None,
        /,
        *,
        samples_per_step: int | None = None,
        write_summary: bool = True,
        summary_extra: dict[str, Any] | None = None,
        progress: Callable[[int, str], None] | None = None,
        **options: Any,
    ) -> None:
        #: the capture's config, with the options given as keywords set
        self.config = config = profiler_config(config, **options)
        p = config.profiler
        self.out_dir = Path(config.out_dir)
        self.warmup_steps = config.warmup_steps
        self.measured_steps = config.measured_steps
        self.schedule = (p.wait, p.warmup, p.active, p.repeat)
        self.options = {
            "record_shapes": p.record_shapes,
            "profile_memory": p.profile_memory,
            "with_stack": p.with_stack,
        }
        self.memory_timeline = memory_timeline = config.memory_timeline
        self.memory_snapshot = config.memory_snapshot
        #: Remarks for summary.json: what this rank could not record, or recorded differently.
        self.notes: list[CaptureNote] = []
        if memory_timeline:
            needed = [k for k, on in self.options.items() if not on]
            self.options = dict.fromkeys(self.options, True)
            if needed:
                self.notes.append(CaptureNote(kind=CaptureNoteKind.MEMORY_TIMELINE_OPTIONS, items=tuple(needed)))
        self._saved = memory.SavedTensors() if config.memory_saved_tensors else None
        self.nvtx = config.nvtx
        #: Whether torch.profiler runs (False: phases, steps and memory are timed without a trace).
        self.trace = config.trace
        self.cuda_profiler_range = config.nsys
        self.samples_per_step = samples_per_step
        self.write_summary = write_summary
        unknown = sorted(set(summary_extra or {}) - SUMMARY_EXTRA_KEYS)
        if unknown:
            raise TypeError(f"summary_extra: unknown key(s) {', '.join(unknown)} (known: config, environment, notes)")
        self.summary_extra = summary_extra or {}
        #: Called with (step, phase) as each phase begins, before it is timed.
        self.progress = progress
        #: Where this rank's time went: seconds since its process started (``/proc``; empty where
        #: that is unknown) at each mark: ``profiling`` (the profiler started), ``steps`` (the
        #: first step began), ``steps_done`` (the last one ended, its trace written),
        #: ``written`` (this file); a launcher adds its own start-up stages before them
        #: (``tracekit capture``: ``start``, ``init``, ``workload``, ``prepare``). Written to
        #: ``phases.rank{r}.json`` as ``timeline_s``.
        self.timeline: dict[str, float] = {}
        self.rank, self.world_size = 0, 1
        self._records: list[_StepRecord] = []
        self._current: _StepRecord | None = None
        self._step = 0
        self._torch_profiler: Any = None
        self._cycle = 0
        self._cuda = False
        self._nvtx_domain: Any = None
        self._profiling_cuda_range = False
        self._history = False  # recording the CUDA allocator's history for the snapshot
        self._last_sample: tuple[int, dict[str, int]] | None = None
        #: The lock of this rank's part of ``out_dir``, held from ``__enter__`` to ``__exit__``.
        self._lock = contextlib.ExitStack()

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> Profiler:
        self.rank, self.world_size = _dist()
        self._lock = contextlib.ExitStack()
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise InputError("out_dir is an existing file, not a folder", path=self.out_dir)
        if processes.RUN_ENV not in os.environ:  # tracekit's own ranks: their command holds the lock
            self._lock.enter_context(folder_lock(self.out_dir, part=f"rank{self.rank}"))
        try:
            self._enter()
        except BaseException:
            self._lock.close()
            raise
        return self

    def _enter(self) -> None:
        """The rest of ``__enter__``, once ``out_dir`` is this rank's to write."""
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        _check_not_foreign(self.out_dir, self.rank, summary=self.write_summary)
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create out_dir ({exc.strerror or exc})", path=self.out_dir) from None
        self._cuda = torch.cuda.is_available()
        self.notes.extend(_memory_notes(cuda=self._cuda, snapshot=self.memory_snapshot))
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self._cuda else [])
        wait, warmup, active, repeat = self.schedule
        self._torch_profiler = (
            profile(
                activities=activities,
                schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=repeat),
                on_trace_ready=self._write_trace,
                record_shapes=self.options["record_shapes"],
                profile_memory=self.options["profile_memory"],
                with_stack=self.options["with_stack"],
            )
            if self.trace
            else contextlib.nullcontext()
        )
        if self.nvtx:
            self._nvtx_domain = _nvtx_domain()
        self._torch_profiler.__enter__()
        self._mark("profiling")
        if self.warmup_steps == 0:
            self._start_measured()
        self._begin_step()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        with self._lock:  # released once the files are written (or the error is on its way)
            self._exit(exc_type, exc, tb)

    def _exit(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._end_step_range(self._current)
        self._current = None  # a step left open by an exception is not recorded
        self._set_cuda_range(False)
        self._torch_profiler.__exit__(exc_type, exc, tb)
        if self._history:  # also after an error: a snapshot is what explains an out-of-memory
            self._history = False
            try:
                memory.dump_snapshot(self.out_dir / files.memory_snapshot_name(self.rank))
            except Exception as error:  # after an error, that error is the one to report
                self.notes.append(_failed(CaptureNoteKind.NO_SNAPSHOT, self.rank, error))
        if exc_type is None:
            self._finish()

    # -- phases and steps ----------------------------------------------------------
    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time ``name`` on the host and mark it for torch.profiler and Nsight Systems."""
        from torch.profiler import record_function

        _check_phase_name(name)
        if self.progress is not None:
            self.progress(self._step, name)
        record = self._current
        saved = self._saved if name == "forward" and self._step >= self.warmup_steps else None
        counting = saved.counting() if saved is not None else contextlib.nullcontext()
        memory_start = self._sample() if record is not None else {}
        nvtx_range = self._nvtx_domain.start_range(message=name) if self._nvtx_domain is not None else None
        start = time.perf_counter_ns()
        try:
            with record_function(PHASE_PREFIX + name), counting:
                yield
        finally:
            elapsed = time.perf_counter_ns() - start
            if nvtx_range is not None:
                self._nvtx_domain.end_range(nvtx_range)
            if record is not None and record is self._current:
                record.phases[name] = record.phases.get(name, 0) + elapsed
                record.add_memory(name, memory_start, self._sample(fresh=True))
                if saved is not None:
                    record.saved_tensor_bytes = max(record.saved_tensor_bytes or 0, saved.bytes)

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
            before = self._sample()
            sync_start = time.perf_counter_ns()
            self._synchronize()
            now = time.perf_counter_ns()
            record = self._current
            record.memory_end = self._sample(fresh=True)
            record.add_memory(DEVICE_SYNC, before, record.memory_end)
            record.phases[DEVICE_SYNC] = now - sync_start
            record.phases[OTHER] = max(0, now - record.start_ns - sum(record.phases.values()))
            record.cpu_ns = time.process_time_ns() - record.cpu_start_ns
            self._end_step_range(record)
            if self._step >= self.warmup_steps:
                self._records.append(record)
        self._step += 1
        if self.trace:
            self._torch_profiler.step()
        if self._step == self.warmup_steps:
            self._start_measured()
        self._set_cuda_range(self._in_active_window())
        if self.done:
            self._current = None
            self._mark("steps_done")
            return False
        self._begin_step()
        return True

    # -- internals ---------------------------------------------------------------------
    def _mark(self, name: str) -> None:
        """Mark ``name`` in :attr:`timeline` (once: the first time it is reached; ``/proc`` is
        read only then, not at every step)."""
        if name in self.timeline:
            return
        age = files.process_age()
        if age is not None:
            self.timeline[name] = age

    def _begin_step(self) -> None:
        self._mark("steps")
        # an NVTX range per step (Nsight Systems has no ProfilerStep#N): read back as a step
        nvtx_range = self._nvtx_domain.start_range(message=f"step#{self._step}") if self._nvtx_domain else None
        memory_start = self._sample(fresh=True)
        self._current = _StepRecord(
            step=self._step,
            start_ns=time.perf_counter_ns(),
            cpu_start_ns=time.process_time_ns(),
            nvtx_range=nvtx_range,
            memory_start=memory_start,
        )

    def _end_step_range(self, record: _StepRecord | None) -> None:
        if record is not None and record.nvtx_range is not None:
            self._nvtx_domain.end_range(record.nvtx_range)
            record.nvtx_range = None

    def _sample(self, *, fresh: bool = False) -> dict[str, int]:
        """Memory now; at the start of a phase, the sample the previous phase ended with when it
        was taken under :data:`SAMPLE_REUSE_NS` ago (the loop's glue between two phases
        allocates nothing: one read of the allocator's stats per boundary, not two; on an H200
        a read costs 50-100 us of host time)."""
        now = time.perf_counter_ns()
        if not fresh and self._last_sample is not None and now - self._last_sample[0] < SAMPLE_REUSE_NS:
            return self._last_sample[1]
        taken = memory.sample(self._cuda)
        self._last_sample = (time.perf_counter_ns(), taken)
        return taken

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
        """Wait for the device at a step's end (the step's time includes its GPU work), inside
        :data:`CAPTURE_SYNC_RANGE`: the analysis tells this sync of the measurement from the
        training's own and does not advise removing it."""
        if self._cuda:
            import torch
            from torch.profiler import record_function

            nvtx_range = self._nvtx_domain.start_range(message=CAPTURE_SYNC_RANGE) if self._nvtx_domain else None
            try:
                with record_function(CAPTURE_SYNC_RANGE):
                    torch.cuda.synchronize()
            finally:
                if nvtx_range is not None:
                    self._nvtx_domain.end_range(nvtx_range)

    def _start_measured(self) -> None:
        """Where the measured steps begin: reset the device's peaks, start the allocator's history."""
        if not self._cuda:
            return
        import torch

        torch.cuda.reset_peak_memory_stats()
        if self.memory_snapshot and not self._history:
            memory.start_history()
            self._history = True

    def _memory(self) -> dict[str, Any]:
        """Peaks (device: since the measured steps began; RSS: the whole process) and memory now."""
        rss = memory.current_rss_bytes()
        # ru_maxrss follows the resident set lazily: the peak is at least what is resident now
        host: dict[str, Any] = {"peak_rss_bytes": max(memory.peak_rss_bytes(), rss or 0)}
        if rss is not None:
            host["rss_bytes"] = rss
        if self._cuda:
            import torch

            return {
                "device": "cuda",
                "peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
                "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
                **memory.sample(cuda=True),
                "total_bytes": int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory),
                **host,
                "scope": "measured steps",
            }
        return {"device": "cpu", **host, "scope": "whole process"}

    def _timeline_device(self) -> str:
        if self._cuda:
            import torch

            return f"cuda:{torch.cuda.current_device()}"
        return "cpu"

    def _write_trace(self, prof: Any) -> None:
        _wait, _warmup, _active, repeat = self.schedule
        folder = self.out_dir if repeat == 1 else self.out_dir / f"cycle{self._cycle}"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".rank{self.rank}.{os.getpid()}.json"
        prof.export_chrome_trace(str(tmp))
        if not tmp.exists():  # torch only logs "Failed to write to log file!": find out why
            files.check_writable(folder)
            raise InputError("torch.profiler wrote no trace (its log in capture.log may say why)", path=tmp)
        files.gzip_atomic(tmp, folder / files.trace_name(self.rank))
        self._cycle += 1
        if self.memory_timeline:
            try:
                memory.export_timeline(prof, folder / files.memory_timeline_name(self.rank), self._timeline_device())
            except Exception as exc:  # the trace is written: say what is missing, keep the capture
                self.notes.append(_failed(CaptureNoteKind.NO_TIMELINE, self.rank, exc))

    def _finish(self) -> None:
        self._mark("written")
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
            "steps": [r.as_json() for r in self._records],
            "memory": self._memory(),
            "notes": msgspec.to_builtins(self.notes),
            "timeline_s": dict(self.timeline),
        }


#: The longest phase name: it is a range's name in the trace and a column in every report.
MAX_PHASE_CHARS: Final = 100


def _check_phase_name(name: object) -> None:
    """Refuse (:class:`TypeError`, :class:`InputError`) a phase name the reports could not show:
    not a str, empty, over :data:`MAX_PHASE_CHARS` characters, or holding a control character."""
    if not isinstance(name, str):
        raise TypeError(f"Profiler.phase: the name must be a str, not a {type(name).__name__}")
    if not name.strip():
        raise InputError("Profiler.phase: the phase name is empty")
    if len(name) > MAX_PHASE_CHARS:
        raise InputError(f"Profiler.phase: the phase name is {len(name)} characters long (at most {MAX_PHASE_CHARS})")
    if any(not c.isprintable() for c in name):
        raise InputError(f"Profiler.phase: the phase name {name!r} holds a control character")


def _check_not_foreign(out_dir: Path, rank: int, *, summary: bool) -> None:
    """Refuse (:class:`InputError`) an ``out_dir`` holding files this rank would write over that are
    not a tracekit capture's: a ``summary.json`` of another kind, or this rank's trace or phase
    file with no capture summary beside it (the user's own, or left by a run that did not finish).
    As ``tracekit capture`` does, an earlier tracekit capture is written over, other files never."""
    if outdir.is_capture(out_dir):
        return
    mine = [files.trace_name(rank), files.phases_name(rank), *([files.SUMMARY] if summary and rank == 0 else [])]
    found = [name for name in mine if (out_dir / name).exists()]
    if found:
        raise InputError(
            f"out_dir holds {', '.join(found)}, not from a tracekit capture (no capture summary.json beside "
            "it); tracekit never writes over files it did not write: give a new or empty folder, or remove them",
            path=out_dir,
        )


def _memory_notes(*, cuda: bool, snapshot: bool) -> list[CaptureNote]:
    """What a CPU run cannot record about memory, said rather than left out."""
    if cuda:
        return []
    notes = [CaptureNote(kind=CaptureNoteKind.CPU_MEMORY)]
    if snapshot:
        notes.append(CaptureNote(kind=CaptureNoteKind.CPU_SNAPSHOT))
    return notes


def _failed(kind: CaptureNoteKind, rank: int, error: BaseException) -> CaptureNote:
    """What ``rank`` could not write, and the error that stopped it."""
    return CaptureNote(kind=kind, rank=rank, error=f"{type(error).__name__}: {error}")


def _nvtx_domain() -> Any:
    """The ``tracekit`` NVTX domain, or None when the nvtx package is missing."""
    try:
        import nvtx
    except ImportError:
        return None
    return nvtx.get_domain(NVTX_DOMAIN)
