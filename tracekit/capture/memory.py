"""What one rank's memory holds during capture: samples at phase boundaries, saved tensors, files.

- :func:`sample`: memory now. On CUDA the caching allocator's ``allocated_bytes`` and
  ``reserved_bytes`` of the current device (host-side counters: no synchronization); on CPU
  the process's resident set, ``rss_bytes`` (``/proc/self/statm``: resident pages x page size).
- :class:`SavedTensors`: bytes of the distinct storages that autograd saves for backward
  while it counts (the forward phase), through ``torch.autograd.graph.saved_tensors_hooks``:
  the activation proxy. Parameters (and views of them) saved for backward are not counted:
  they are held anyway. Tensors saved inside another pair of hooks (non-reentrant activation
  checkpointing, CPU offload) are not seen, as they are not held either.
- :func:`export_timeline` and :func:`dump_snapshot`: the profiler's categorized memory
  timeline and the CUDA allocator's snapshot, each written atomically.

torch is imported only inside functions, as everywhere in :mod:`tracekit.capture`.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import warnings
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from tracekit.results.vocab import MemoryMeasure

#: What the phase deltas measure: device memory allocated on CUDA, the resident set on CPU.
ALLOCATED: Final[MemoryMeasure] = "allocated_bytes"
RESERVED: Final = "reserved_bytes"
RSS: Final[MemoryMeasure] = "rss_bytes"

_STATM: Final = "/proc/self/statm"
_PAGE: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

#: How many allocator events the snapshot keeps (``_record_memory_history(max_entries=...)``).
SNAPSHOT_MAX_ENTRIES: Final = 100_000


#: The open ``/proc/self/statm`` of this process, by pid (a forked child opens its own).
_statm_fd: dict[int, int] = {}


def current_rss_bytes() -> int | None:
    """The process's resident set size now (``/proc/self/statm``), or None without ``/proc``.

    The file stays open: a read is about 1.5 us, against 10 to open it each time.
    """
    try:
        pid = os.getpid()
        fd = _statm_fd.get(pid)
        if fd is None:
            fd = _statm_fd[pid] = os.open(_STATM, os.O_RDONLY | os.O_CLOEXEC)
        return int(os.pread(fd, 128, 0).split()[1]) * _PAGE
    except (OSError, IndexError, ValueError, AttributeError):  # AttributeError: no os.pread
        return None


def peak_rss_bytes() -> int:
    """The process's peak resident set size since it started (``ru_maxrss``)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss) * (1 if sys.platform == "darwin" else 1024)


def sample(cuda: bool) -> dict[str, int]:
    """Memory now: ``allocated_bytes`` and ``reserved_bytes`` on CUDA, else ``rss_bytes``
    (empty where the resident set cannot be read)."""
    if cuda:
        import torch

        # one read of the allocator's nested stats: memory_allocated() and memory_reserved()
        # each flatten all of them in Python (about 0.35 ms a phase boundary for both, measured
        # on an H200: host time the GPU waited for on a 14 ms step)
        # (empty before CUDA is initialized: nothing allocated yet)
        stats = torch.cuda.memory_stats_as_nested_dict()
        return {key: int(stats.get(key, {}).get("all", {}).get("current", 0)) for key in (ALLOCATED, RESERVED)}
    rss = current_rss_bytes()
    return {} if rss is None else {RSS: rss}


def delta(start: dict[str, int], end: dict[str, int]) -> dict[str, int]:
    """``end - start`` of every quantity both hold."""
    return {k: end[k] - v for k, v in start.items() if k in end}


class SavedTensors:
    """Counts the bytes of distinct storages saved for backward inside :meth:`counting`."""

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}
        self._parameter: type = type(None)

    @property
    def bytes(self) -> int:
        """Bytes of the distinct storages saved since :meth:`counting` began."""
        return sum(self._seen.values())

    def _pack(self, tensor: Any) -> Any:
        # a parameter, or a view of one (``weight.t()``), is held anyway: not an activation
        if not isinstance(tensor, self._parameter) and not isinstance(tensor._base, self._parameter):
            try:
                storage = tensor.untyped_storage()
                key, size = storage.data_ptr(), storage.nbytes()
            except (RuntimeError, NotImplementedError, TypeError):  # a wrapper subclass without storage
                key, size = id(tensor), tensor.numel() * tensor.element_size()
            self._seen.setdefault(key, int(size))
        return tensor.detach()  # never the tensor itself: that would be a reference cycle

    @staticmethod
    def _unpack(tensor: Any) -> Any:
        return tensor

    @contextlib.contextmanager
    def counting(self) -> Iterator[None]:
        """Count what autograd saves inside this block (from zero)."""
        import torch
        from torch.autograd.graph import saved_tensors_hooks

        self._parameter = torch.nn.Parameter
        self._seen = {}
        with saved_tensors_hooks(self._pack, self._unpack):
            yield


def export_timeline(prof: Any, path: Path, device: str) -> None:
    """The profiler's raw categorized memory timeline for ``device`` into ``path``
    (``*.raw.json.gz``: rows of ``[time_ns, action, bytes, category]``), written atomically."""
    tmp = path.with_name(f".{path.name.removesuffix('.raw.json.gz')}.{os.getpid()}.raw.json.gz")
    try:
        with warnings.catch_warnings():  # deprecated in favour of the CUDA-only snapshot
            warnings.simplefilter("ignore", FutureWarning)
            prof.export_memory_timeline(str(tmp), device=device)
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def start_history(max_entries: int = SNAPSHOT_MAX_ENTRIES) -> None:
    """Start recording the CUDA caching allocator's history (for :func:`dump_snapshot`)."""
    import torch

    torch.cuda.memory._record_memory_history(max_entries=max_entries)


def dump_snapshot(path: Path) -> None:
    """The CUDA allocator's snapshot (segments, blocks, recorded history) into ``path``,
    written atomically; then stop recording."""
    import torch

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.cuda.memory._dump_snapshot(str(tmp))  # type: ignore[no-untyped-call]
        tmp.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
