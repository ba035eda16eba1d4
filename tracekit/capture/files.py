"""File names and atomic writes shared by the capture stage (no torch here)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
from typing import TYPE_CHECKING, Any, Final

from tracekit.errors import InputError, os_reason

if TYPE_CHECKING:
    from pathlib import Path

SUMMARY = "summary.json"
CONFIG = "capture_config.json"
LOG = "capture.log"

#: Every name ``tracekit capture`` writes into its folder (and its temporary files); any
#: other entry of an earlier capture's folder is the user's and is kept.
_OWN: Final = re.compile(
    r"^(summary\.json|capture_config\.json|capture\.(log|nsys-rep|qdrep|qdstrm|sqlite)"
    r"|rank\d+\.pt\.trace\.json\.gz|phases\.rank\d+\.json|cycle\d+|\.rank\d+\..+|\..+\.\d+\.tmp"
    r"|\.?memory_timeline\.rank\d+(\.\d+)?\.raw\.json\.gz|memory_snapshot\.rank\d+\.pickle)$"
)


def is_own_output(name: str) -> bool:
    """Whether ``name`` (a file or folder in a capture folder) is written by ``tracekit capture``."""
    return _OWN.match(name) is not None


def trace_name(rank: int) -> str:
    """The trace file of one rank."""
    return f"rank{rank}.pt.trace.json.gz"


def phases_name(rank: int) -> str:
    """The per-step phase timings of one rank."""
    return f"phases.rank{rank}.json"


def memory_timeline_name(rank: int) -> str:
    """The profiler's categorized memory timeline of one rank (raw rows, gzipped JSON)."""
    return f"memory_timeline.rank{rank}.raw.json.gz"


def memory_snapshot_name(rank: int) -> str:
    """The CUDA allocator's snapshot of one rank (``torch.cuda.memory._dump_snapshot``)."""
    return f"memory_snapshot.rank{rank}.pickle"


def error_name(rank: int) -> str:
    """Where a crashed rank leaves its traceback."""
    return f".rank{rank}.error.txt"


#: How a rank that could not write its error file (a full disk) says its error in capture.log.
RANK_ERROR_LINE: Final = re.compile(r"^tracekit rank (\d+) error: (.+)$", re.MULTILINE)


def rank_error_line(rank: int, headline: str) -> str:
    """The line of capture.log that carries a rank's error when its error file cannot be written."""
    return f"tracekit rank {rank} error: {' '.join(headline.split())}"


def done_name(rank: int) -> str:
    """Written by a rank once it has finished every step and written its files."""
    return f".rank{rank}.done"


def exit_name(rank: int) -> str:
    """How a rank's process ended (exit code or signal, and when), from its supervisor."""
    return f".rank{rank}.exit"  # JSON, but not named .json: never taken for a trace


def progress_name(rank: int) -> str:
    """Where a rank is: its start-up stage, or its step and phase (overwritten in place)."""
    return f".rank{rank}.progress"


def status_names(rank: int) -> tuple[str, ...]:
    """The files that track a rank while the run goes on (removed once it succeeded)."""
    return (done_name(rank), exit_name(rank), progress_name(rank))


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` under a temporary name, flush it to disk, then rename: readers (and a
    crash) never leave half a file, only the old one or the new one. A file system's error
    (a full disk: ENOSPC, a read-only one: EROFS) is an :class:`InputError` naming ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise InputError(f"cannot write ({os_reason(exc)})", path=path) from exc
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON atomically (see :func:`write_bytes_atomic`)."""
    write_bytes_atomic(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def gzip_atomic(source: Path, target: Path) -> None:
    """Gzip ``source`` into ``target`` (temporary name, then rename) and remove ``source``."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with source.open("rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
        tmp.replace(target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
            raise InputError(f"cannot write ({os_reason(exc)})", path=target) from exc
        raise
    source.unlink()


def check_writable(folder: Path, *, probe_bytes: int = 1 << 16) -> None:
    """Raise an :class:`InputError` naming ``folder`` and the cause (ENOSPC, EROFS...) when
    ``probe_bytes`` cannot be written into it: why a writer that does not say (torch.profiler's
    trace export) wrote nothing."""
    probe = folder / f".probe.{os.getpid()}.tmp"
    try:
        with probe.open("wb") as out:
            out.write(b"\0" * probe_bytes)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise InputError(f"cannot write into this folder ({os_reason(exc)})", path=folder) from exc
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


#: What :func:`process_age` adds: in a process forked to run a rank (under its supervisor), the
#: age of the process it was forked from, then (so the age counts from the command's start).
_AGE_BEFORE_FORK: list[float] = [0.0]


def forked_at(age: float | None) -> None:
    """This process was forked from one ``age`` seconds old (None: unknown, count from the fork)."""
    _AGE_BEFORE_FORK[0] = age or 0.0


def process_age() -> float | None:
    """Seconds since this process started (to 0.01 s; a forked rank's from its parent's start),
    from ``/proc``; None where there is none (not Linux): what
    :attr:`tracekit.capture.Profiler.timeline` counts from."""
    try:
        with open("/proc/self/stat", "rb") as f:
            # the fields after the command's closing parenthesis start at the 3rd; starttime is the 22nd
            start_ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        return round(_AGE_BEFORE_FORK[0] + uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 2)
    except (OSError, ValueError, IndexError):
        return None
