"""A/B capture: the same config captured with two sets of overrides, interleaved.

``tracekit capture --ab A B [--repeats N]``: A and B are override texts written as on the
command line (``policy.threshold=10``, ``--workload_args.sync_check=true``, several separated
by spaces, a JSON value kept whole; ``''`` is the config as is). Each applies after the
command line's own overrides, which both sides share. The captures run A B A B ... (N of
each) so that drift of the machine (thermals, other load) falls on both sides alike. Each is
a normal capture (:func:`tracekit.capture.launcher.capture`) into ``out_dir/a`` and
``out_dir/b`` (``out_dir/a/run1`` .. ``runN`` when N > 1), and ``out_dir/ab.json`` records
what ran (:mod:`tracekit.results.ab`).

Like a single capture, the A/B folder is written beside ``out_dir`` and replaces it only once
every capture has succeeded (:mod:`tracekit.capture.outdir`). The first capture that fails
stops the run: the error names the side and the repeat, and what was captured until then is
kept in ``<out_dir>.tracekit-failed``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from tracekit.capture import files, outdir, processes
from tracekit.capture.config import CaptureConfig, load_config, parse_overrides
from tracekit.capture.deadline import deadline
from tracekit.capture.launcher import CaptureError, CaptureInterrupted, capture, check_nsys
from tracekit.capture.workloads import resolve
from tracekit.errors import InputError, TracekitError
from tracekit.locks import folder_lock
from tracekit.results.ab import AB_SCHEMA, ABCapture, ABRun, ABSide, dump_ab

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tracekit.results.vocab import SideKey

__all__ = ["AB_FILE", "AB_FOLDER", "ABPlan", "capture_ab", "interleaved", "parse_side", "plan_ab", "run_folder"]

AB_FILE: Final = "ab.json"
SIDES: Final[tuple[SideKey, SideKey]] = ("a", "b")

_OWN: Final = re.compile(r"^(ab\.json|[ab](\.tracekit-failed|\.tracekit-tmp-[0-9a-f]+)?|\.ab\.json\.\d+\.tmp)$")
#: An A/B folder: ``ab.json``, ``a/``, ``b/`` (and, in a failed one, the sides' failed runs).
AB_FOLDER: Final = outdir.FolderKind("a tracekit A/B capture", AB_FILE, AB_SCHEMA, lambda name: bool(_OWN.match(name)))
#: ``key=`` at the start of an override written without its leading ``--``.
_KEY: Final = re.compile(r"^[A-Za-z_][\w.-]*=")
_CLOSE: Final = {"{": "}", "[": "]"}


def _tokens(text: str) -> list[str]:
    """``text`` split at white space outside JSON brackets and double-quoted strings."""
    tokens: list[str] = []
    current: list[str] = []
    stack: list[str] = []
    quoted = escaped = False
    for ch in text:
        if quoted:
            escaped, quoted = ch == "\\" and not escaped, quoted and (ch != '"' or escaped)
        elif ch == '"':
            quoted = True
        elif ch in _CLOSE:
            stack.append(_CLOSE[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
        elif ch.isspace() and not stack:
            if current:
                tokens.append("".join(current))
                current = []
            continue
        current.append(ch)
    if current:
        tokens.append("".join(current))
    return tokens


def parse_side(text: str, side: SideKey) -> dict[str, str]:
    """One side's overrides, read by the command line's rules: ``key=value`` (or ``--key=value``,
    ``--key value``, a bare ``--flag``), several separated by spaces; ``''`` is none."""
    words = [f"--{word}" if _KEY.match(word) else word for word in _tokens(text)]
    try:
        overrides = parse_overrides(words)
    except InputError as exc:
        raise InputError(f"--ab side {side.upper()} {text!r}: {exc.reason.replace(' --field', ' field')}") from None
    if "out_dir" in overrides:
        raise InputError(f"--ab side {side.upper()} {text!r}: out_dir is the A/B folder, shared by both sides")
    return overrides


def interleaved(repeats: int) -> list[tuple[SideKey, int]]:
    """The order the captures run in: A B A B ..., ``repeats`` of each (repeats count from 1)."""
    return [(side, repeat) for repeat in range(1, repeats + 1) for side in SIDES]


def run_folder(side: SideKey, repeat: int, repeats: int) -> Path:
    """Where one capture goes, relative to the A/B folder: ``a``, or ``a/run2`` when repeated."""
    return Path(side) if repeats == 1 else Path(side, f"run{repeat}")


@dataclass(frozen=True)
class ABPlan:
    """Both sides' checked configs (their ``out_dir`` is the A/B folder) and how often to run each."""

    out_dir: str
    repeats: int
    texts: dict[SideKey, str]
    overrides: dict[SideKey, dict[str, str]]
    configs: dict[SideKey, CaptureConfig]
    config_path: str | None
    common_overrides: dict[str, str]


def plan_ab(
    config_path: str | Path | None, common: dict[str, str], sides: Sequence[str], *, repeats: int = 1
) -> ABPlan:
    """Read both sides' overrides and check both configs; nothing runs yet.

    Errors (an unknown key, a bad value) are :class:`InputError` naming the side.
    """
    if len(sides) != 2:
        raise InputError(f"--ab takes two override texts (A and B), got {len(sides)}")
    if repeats < 1:
        raise InputError(f"--repeats must be at least 1, got {repeats}")
    texts: dict[SideKey, str] = {"a": sides[0], "b": sides[1]}
    overrides = {side: parse_side(texts[side], side) for side in SIDES}
    configs: dict[SideKey, CaptureConfig] = {}
    for side in SIDES:
        try:
            configs[side] = load_config(config_path, {**common, **overrides[side]})
        except InputError as exc:
            load_config(config_path, common)  # the error of the config and the shared overrides, if theirs
            raise InputError(f"--ab side {side.upper()} {texts[side]!r}: {exc.reason}", path=exc.path) from None
    return ABPlan(
        out_dir=configs["a"].out_dir,
        repeats=repeats,
        texts=texts,
        overrides=overrides,
        configs=configs,
        config_path=None if config_path is None else str(config_path),
        common_overrides=dict(common),
    )


def capture_ab(plan: ABPlan, *, starting: Callable[[SideKey, int, Path], None] | None = None) -> ABCapture:
    """Run the plan's captures interleaved into a fresh A/B folder that replaces ``out_dir`` on
    success; returns what ``ab.json`` records. ``starting(side, repeat, folder)`` is called
    before each capture with where it will end up.

    The first failure stops the run with a :class:`CaptureError` (the failed capture's exit
    code) naming the side and the repeat; what was captured is kept in
    ``<out_dir>.tracekit-failed``.
    """
    target = outdir.check(plan.out_dir, AB_FOLDER)
    for config in plan.configs.values():
        check_nsys(config)
        with deadline("capture --ab", config.timeout):  # importing the workload's module runs its code here
            resolve(config.workload)
    with folder_lock(target):  # a second run into the same folder is refused, naming this one
        return _capture_ab_into(plan, target, starting)


def _capture_ab_into(plan: ABPlan, target: Path, starting: Callable[[SideKey, int, Path], None] | None) -> ABCapture:
    """The A/B captures of ``plan`` into ``target`` (checked, and locked by this process)."""
    outdir.clear_stale(target)  # the folders of a run killed before it could remove them
    folder = outdir.staging(target)
    runs: list[ABRun] = []
    try:
        for side, repeat in interleaved(plan.repeats):
            where = run_folder(side, repeat, plan.repeats)
            if starting is not None:
                starting(side, repeat, target / where)
            runs.append(_run(plan, side, repeat, folder, where))
        record = _record(plan, runs)
        files.write_bytes_atomic(folder / AB_FILE, dump_ab(record))
        with processes.interrupts_ignored():
            outdir.commit(folder, target, AB_FOLDER)
    except BaseException as exc:
        with processes.interrupts_ignored():
            kept = outdir.keep_failed(folder, target, AB_FOLDER)
        if isinstance(exc, _Stopped):
            raise exc.error(folder, kept) from None
        raise
    return record


class _Stopped(Exception):
    """A capture of the A/B run failed (or was interrupted)."""

    def __init__(self, side: SideKey, repeat: int, plan: ABPlan, cause: TracekitError) -> None:
        super().__init__(cause.message)
        self.side, self.repeat, self.plan, self.cause = side, repeat, plan, cause

    def error(self, folder: Path, kept: Path) -> CaptureError:
        """The one-line error, with the paths in the A/B folder as they are now (``kept``)."""
        which = f"side {self.side.upper()} {self.plan.texts[self.side]!r}, repeat {self.repeat} of {self.plan.repeats}"
        message = self.cause.message.replace(str(folder), str(kept))
        error = CaptureError(f"A/B capture stopped at {which}: {message}; what was captured is kept in {kept}")
        error.exit_code = self.cause.exit_code
        return error


def _run(plan: ABPlan, side: SideKey, repeat: int, folder: Path, where: Path) -> ABRun:
    """One capture of the A/B run into ``folder / where``."""
    config = msgspec.structs.replace(plan.configs[side], out_dir=str(folder / where))
    started = datetime.now(timezone.utc)
    clock = time.perf_counter()
    try:
        summary = capture(config)
    except TracekitError as exc:
        raise _Stopped(side, repeat, plan, exc) from exc
    except KeyboardInterrupt:  # between the ranks' runs: stop as a capture does
        raise _Stopped(side, repeat, plan, CaptureInterrupted("interrupted")) from None
    return ABRun(
        side=side,
        repeat=repeat,
        folder=where.as_posix(),
        started=started.isoformat(timespec="seconds"),
        seconds=round(time.perf_counter() - clock, 3),
        step_mean_ns=summary.step.mean_ns,
    )


def _record(plan: ABPlan, runs: list[ABRun]) -> ABCapture:
    def side(name: SideKey) -> ABSide:
        folders = [run_folder(name, r, plan.repeats).as_posix() for r in range(1, plan.repeats + 1)]
        return ABSide(text=plan.texts[name], overrides=plan.overrides[name], folders=folders)

    return ABCapture(
        config_path=plan.config_path,
        common_overrides=plan.common_overrides,
        repeats=plan.repeats,
        a=side("a"),
        b=side("b"),
        order=runs,
    )
