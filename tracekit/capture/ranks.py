"""What became of each rank of a capture, and which rank to name when the run fails.

Each rank leaves small files in the capture folder (names in :mod:`tracekit.capture.files`):

- ``.rank{r}.progress``: where it is, overwritten in place (start-up stage, or step and
  phase), so that a run stopped by its timeout can name the rank that fell behind;
- ``.rank{r}.error.txt``: a Python error (first line for the user, then the traceback);
- ``.rank{r}.done``: it finished every step and wrote its files;
- ``.rank{r}.exit``: how its process ended (exit code or signal, and when), written by
  its supervisor (:mod:`tracekit.capture.supervisor`), so a rank that vanished without a
  word (``os._exit``, a crash in native code) is known too.

The rank that failed *first* is the cause; its peers fail after it (their connection to it
closed) or are stopped by the launcher. A peer's lost connection and a launcher's kill are
consequences, never the cause when a rank failed on its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from tracekit.capture import files
from tracekit.capture.profiler import PHASES
from tracekit.errors import InputError, TracekitError, is_disk_error

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

#: Start-up stages of a rank, in order, then the steps, then writing its files.
STAGES: Final = ("start", "init", "workload", "prepare", "steps", "finishing")
_STAGE_TEXT: Final = {
    "start": "starting up",
    "init": "joining the process group",
    "workload": "building the workload",
    "prepare": "in accelerate's prepare (model and optimizer set-up)",
    "finishing": "writing its traces and summary",
}
_RECORD_BYTES: Final = 128
#: Errors a rank raises because a peer went away: consequences, not causes.
PEER_LOST: Final = re.compile(
    r"closed by peer|reset by peer|broken pipe|connection refused|remote process exited|communicator was aborted",
    re.IGNORECASE,
)
#: Signals the launcher (or tracekit) stops ranks with: a rank ended by one was stopped.
_STOP_SIGNALS: Final = frozenset({signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGHUP})
ERROR_TAIL_LINES: Final = 3


class CaptureError(TracekitError):
    """A rank of the capture failed, the run timed out, or it was interrupted."""

    exit_code = 1


class RankProgress:
    """Written by a rank: its stage, or its step and phase, overwritten in place (one
    ``pwrite`` of a fixed-size record: cheap enough to call as every phase begins)."""

    def __init__(self, folder: Path, rank: int) -> None:
        self.folder, self.rank = folder, rank
        self._fd = os.open(folder / files.progress_name(rank), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        #: each start-up stage entered, at the process's age then (s; the Profiler's timeline)
        self.ages: dict[str, float] = {}

    def stage(self, name: str) -> None:
        """The rank entered a start-up stage (one of :data:`STAGES`)."""
        age = files.process_age()
        if age is not None:
            self.ages.setdefault(name, age)
        self._write({"stage": name})

    def phase(self, step: int, name: str) -> None:
        """The rank entered phase ``name`` of step ``step`` (the Profiler's ``progress`` hook)."""
        self._write({"stage": "steps", "step": step, "phase": name})

    def done(self) -> None:
        """The rank finished: every step ran and its files are written."""
        os.close(self._fd)
        files.write_bytes_atomic(self.folder / files.done_name(self.rank), b"done\n")

    def _write(self, data: dict[str, Any]) -> None:
        os.pwrite(self._fd, json.dumps(data).encode("utf-8").ljust(_RECORD_BYTES)[:_RECORD_BYTES], 0)


@dataclass(frozen=True)
class Position:
    """Where a rank was last seen: a start-up stage, or a step and phase."""

    stage: str
    step: int = -1
    phase: str = ""

    @property
    def key(self) -> tuple[int, int, int]:
        """Orders positions: a rank with a smaller key is behind."""
        stage = STAGES.index(self.stage) if self.stage in STAGES else 0
        phase = PHASES.index(self.phase) if self.phase in PHASES else len(PHASES)
        return (stage, self.step, phase if self.stage == "steps" else 0)

    def describe(self) -> str:
        """``in forward of step 2``, ``building the workload``."""
        if self.stage == "steps":
            return f"in {self.phase} of step {self.step}"
        return _STAGE_TEXT.get(self.stage, self.stage)


@dataclass(frozen=True)
class RankState:
    """Everything a rank left behind. Times are ``time.time_ns()`` clock values."""

    rank: int
    done: bool = False
    error: str | None = None
    error_ns: int | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    exit_ns: int | None = None
    position: Position | None = None

    @property
    def ended(self) -> bool:
        """Whether the rank failed or its process ended without finishing."""
        return not self.done and (self.error is not None or self.exit_code is not None or self.exit_signal is not None)

    @property
    def headline(self) -> str:
        """One line: what went wrong on this rank."""
        if self.error is not None:
            return self.error.splitlines()[0] if self.error.strip() else "failed"
        if self.exit_signal is not None:
            return f"was killed by {_signal_name(self.exit_signal)}, without a Python error"
        if self.exit_code is not None:
            if self.exit_code == 0:
                return "exited with code 0 before finishing, without an error report (os._exit in the workload?)"
            return f"exited with code {self.exit_code} without a Python error (os._exit, or a crash in native code)"
        return "did not finish"

    @property
    def is_cause(self) -> bool:
        """Whether the rank failed on its own, not because a peer went away or it was stopped."""
        if self.error is not None:
            return PEER_LOST.search(self.headline) is None
        if self.exit_signal is not None:
            return self.exit_signal not in _STOP_SIGNALS
        return self.exit_code is not None

    @property
    def first_sign_ns(self) -> int:
        """When the rank's failure first showed: its error report, else its exit."""
        times = [t for t in (self.error_ns, self.exit_ns) if t is not None]
        return min(times) if times else 2**63


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_state(folder: Path, rank: int) -> RankState:
    """The files one rank left in ``folder``."""
    error_path = folder / files.error_name(rank)
    error, error_ns = None, None
    if error_path.exists():
        error = error_path.read_text(encoding="utf-8", errors="replace")
        error_ns = error_path.stat().st_mtime_ns
    ended = _read_json(folder / files.exit_name(rank)) or {}
    progress = _read_json(folder / files.progress_name(rank))
    position = None
    if progress is not None and isinstance(progress.get("stage"), str):
        position = Position(str(progress["stage"]), int(progress.get("step", -1)), str(progress.get("phase", "")))
    return RankState(
        rank=rank,
        done=(folder / files.done_name(rank)).exists(),
        error=error,
        error_ns=error_ns,
        exit_code=ended.get("exit_code"),
        exit_signal=ended.get("signal"),
        exit_ns=ended.get("time_ns"),
        position=position,
    )


def read_states(folder: Path, nproc: int) -> list[RankState]:
    """The state of ranks ``0 .. nproc-1``."""
    return [read_state(folder, rank) for rank in range(nproc)]


def failed_in_order(states: Sequence[RankState]) -> list[RankState]:
    """The ranks that failed, the cause first: ranks that failed on their own before those
    that lost a peer or were stopped, each group in the order their failure showed."""
    return sorted((s for s in states if s.ended), key=lambda s: (not s.is_cause, s.first_sign_ns, s.rank))


def _ranks(states: Sequence[RankState]) -> str:
    return ",".join(str(s.rank) for s in states)


def _named(states: Sequence[RankState]) -> str:
    """``rank 1`` or ``ranks 0,2``."""
    return f"rank {states[0].rank}" if len(states) == 1 else f"ranks {_ranks(states)}"


#: Python's line between a cause and the error raised from it.
_CAUSE_SEPARATOR: Final = "The above exception was the direct cause of the following exception:"


def _tail(error: str) -> str:
    """The last lines of the traceback that matter: the innermost cause's (the user's code,
    not tracekit re-raising it), without caret lines."""
    text = error.split("\n", 1)[1] if "\n" in error else ""
    text = text.split(_CAUSE_SEPARATOR, 1)[0]
    body = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("Traceback")]
    body = [ln for ln in body if set(ln) - set("^~ ")]
    return " | ".join(body[-ERROR_TAIL_LINES:])


#: DDP's error when a parameter got no gradient and find_unused_parameters is off.
DDP_REFUSED: Final = re.compile(r"find_unused_parameters|did not receive grad|Expected to have finished reduction")
#: What to do about it, said after its error.
DDP_HINT: Final = (
    "DDP stopped at a parameter that got no gradient: tracekit audit-params (the same config) names "
    "the parameters, one process, one batch; or capture with --find_unused_parameters=true, which "
    "walks the autograd graph after every forward"
)


def failure(states: Sequence[RankState], folder: Path, returncode: int) -> TracekitError:
    """The one-line error of a run whose launcher exited with ``returncode`` (or whose ranks
    did not all finish): the rank that failed first, and where its whole error is."""
    failed = failed_in_order(states)
    if not failed:
        unfinished = [s for s in states if not s.done]
        if (unwritten := _unwritten_error(folder)) is not None:
            return unwritten
        log_tail = _log_tail(folder / files.LOG)
        if unfinished and any(s.position is not None for s in states):
            return CaptureError(
                f"rank(s) {_ranks(unfinished)} did not finish and left no error "
                f"(the launcher exited with code {returncode}); last lines of {folder / files.LOG}: {log_tail}"
            )
        return CaptureError(
            f"the launcher exited with code {returncode}; last lines of {folder / files.LOG}: {log_tail}"
        )
    first = failed[0]
    bad_input = first.error is not None and "tracekit.errors.InputError" in first.error
    if bad_input and all(s.error is not None and s.headline == first.headline for s in states):
        return InputError(first.headline)  # the same bad input on every rank: one line, exit 2
    kind = InputError if bad_input else CaptureError  # bad input on some ranks: named, still exit 2
    also = f" (then rank(s) {_ranks(failed[1:])} failed too)" if len(failed) > 1 else ""
    if first.error is not None:
        tail = _tail(first.error)
        where = folder / files.error_name(first.rank)
        hint = f"; {DDP_HINT}" if DDP_REFUSED.search(first.error) else ""
        return kind(
            f"rank {first.rank} failed first{also}: {first.headline}{hint}; last lines: {tail} (all of it: {where})"
        )
    return CaptureError(f"rank {first.rank} failed first{also}: {first.headline} (its output: {folder / files.LOG})")


def hang(states: Sequence[RankState]) -> str:
    """Which ranks did not finish, naming those furthest behind: the rank(s) that hung, while
    the others wait for them in a collective further on."""
    unfinished = [s for s in states if not s.done]
    if not unfinished:
        return "every rank finished, but the launcher did not exit"

    def key(s: RankState) -> tuple[int, int, int]:
        return s.position.key if s.position is not None else (-1, -1, -1)

    behind_key = min(key(s) for s in unfinished)
    behind = [s for s in unfinished if key(s) == behind_key]
    ahead = [s for s in unfinished if key(s) != behind_key]
    text = f"{_named(behind)} did not finish: {'it' if len(behind) == 1 else 'they'} {_where(behind[0], behind)}"
    if ahead:
        groups: dict[str, list[RankState]] = {}
        for s in sorted(ahead, key=key):
            groups.setdefault(_where(s, [s]), []).append(s)
        further = ", ".join(f"{_named(g)} {_where(g[0], g)}" for g in groups.values())
        text += f", behind every other rank ({further}, waiting)"
    done = [s for s in states if s.done]
    if done:
        text += f"; {_named(done)} finished"
    return text


def _where(state: RankState, group: Sequence[RankState]) -> str:
    was = "was" if len(group) == 1 else "were"
    if state.position is None:
        return f"{'has' if len(group) == 1 else 'have'} not started (still importing, or not launched yet)"
    return f"{was} still {state.position.describe()}"


def _unwritten_error(folder: Path) -> TracekitError | None:
    """The error of a rank that could not write its error file (from capture.log), or why no
    file can be written into ``folder`` now (a full disk, a read-only file system)."""
    try:
        log = (folder / files.LOG).read_text(encoding="utf-8", errors="replace")
    except OSError:
        log = ""
    if (found := files.RANK_ERROR_LINE.search(log)) is not None:
        return InputError(f"rank {found[1]} failed first: {found[2]} (its output: {folder / files.LOG})")
    try:
        files.check_writable(folder)
    except InputError as exc:
        if is_disk_error(exc.__cause__):  # a full disk, a quota, a read-only file system
            return InputError(f"the ranks stopped and no file can be written: {exc.message}")
    return None


def _log_tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in lines[-ERROR_TAIL_LINES:] if line.strip())
