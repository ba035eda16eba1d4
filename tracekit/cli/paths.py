"""Output options checked against the inputs, before anything is read: no command writes over an input.

One guard for every command that writes (:func:`check_outputs`). An output names an input when
it is the same file as one: the same path once symbolic links are resolved, or the same file on
disk (a hard link). The inputs are the files given (traces, saved analyses, ``--config_path``),
the files inside the folders given that tracekit reads (the traces :func:`tracekit.readers.discover`
would read, capture summaries at any depth, sweep, A/B and doctor records, phase timings, memory
timelines), and the capture's ``summary.json`` beside a file given. A command that writes into a
folder of its own (capture's ``--out_dir``, a sweep's, the doctor's, the DataLoader probe's) also
refuses an output among the files it writes there, and an input it would replace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tracekit.cli.emit import is_stdout
from tracekit.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from pathlib import Path

__all__ = ["Written", "check_outputs"]

_Key = tuple[object, ...]
#: The name of a command's arguments (PATHS) among its inputs.
_ARGS: Final = "PATHS"


def _keys(path: Path) -> set[_Key]:
    """What identifies ``path``'s file: its resolved path, and its device and inode when it exists."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a loop of symbolic links
        resolved = path.absolute()
    keys: set[_Key] = {("path", os.path.normcase(str(resolved)))}
    try:
        st = path.stat()
    except OSError:
        return keys
    keys.add(("inode", st.st_dev, st.st_ino))
    return keys


#: Files tracekit reads in a folder besides its traces: capture summaries (at any depth: the runs
#: of repeats, the cells of a sweep), the records of sweeps, A/B captures and doctor runs, phase
#: timings, recorded configs and memory timelines.
_READ: Final = re.compile(
    r"^(summary\.json|sweep\.json|ab\.json|doctor\.json|audit\.json|dataloader\.json|capture_config\.json"
    r"|phases\.rank\d+\.json|memory_timeline\.rank\d+(\.\d+)?\.raw\.json\.gz)$"
)


@dataclass(frozen=True)
class Written:
    """A folder a command writes its own files into (a capture's ``--out_dir``): ``own`` says which
    names in it are the command's; an input there would be replaced, an output would replace them."""

    flag: str
    folder: Path
    own: Callable[[str], bool]


def _inputs(inputs: Mapping[str, Iterable[Path | None]]) -> dict[_Key, str]:
    """Every file the inputs stand for, by key, with what it is (for the message)."""
    found: dict[_Key, str] = {}
    for flag, paths in inputs.items():
        for path in (p for p in paths if p is not None):
            listed = _in_folder(path, flag) if path.is_dir() else _of_file(path, flag)
            for file, what in listed:
                if file.is_file():
                    found.update(dict.fromkeys(_keys(file), f"{what} ({file})"))
    return found


def _in_folder(folder: Path, flag: str) -> Iterator[tuple[Path, str]]:
    """The files tracekit reads in an input folder, with what each is (not its own outputs
    there, an annotated trace or an analysis, which it leaves out: a command may write them again)."""
    from tracekit.readers.discover import is_trace_name  # (readers import polars)
    from tracekit.readers.own_outputs import own_output

    where = "an input folder" if flag == _ARGS else f"the folder {flag} {folder}"
    for inside in folder.rglob("*"):
        if is_trace_name(inside) and own_output(inside) is None:
            yield inside, f"a trace file in {where}"
        elif inside.parent == folder and inside.name == "summary.json":
            yield inside, f"the capture summary of {where}"
        elif _READ.match(inside.name):
            yield inside, f"a file tracekit reads in {where}"


def _of_file(path: Path, flag: str) -> Iterator[tuple[Path, str]]:
    """An input file, and what tracekit reads beside it (the capture summary, memory timelines)."""
    yield path, f"{flag} {path}" if flag != _ARGS else "an input file"
    yield path.parent / "summary.json", "the capture summary beside an input file"
    for timeline in path.parent.glob("memory_timeline.rank*.raw.json.gz"):
        yield timeline, "a memory timeline beside an input file"


def _inside(path: Path, written: Written) -> bool:
    """Whether ``path`` is, or is inside, a name of its own in the folder ``written``."""
    try:
        rel = path.resolve().relative_to(written.folder.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return bool(rel.parts) and written.own(rel.parts[0])


def check_outputs(
    outputs: Mapping[str, Path | None],
    inputs: Mapping[str, Iterable[Path | None]] | Iterable[Path],
    *,
    written: Sequence[Written] = (),
) -> None:
    """Refuse (an :class:`InputError`, one line naming the output, the input and the flag) an
    output that names an input, another output, or a file the command writes in its folder;
    and an input that the command's folder would replace.

    ``outputs`` maps each option (``--json``) to its file, or None where it was not given; ``-``
    (stdout) for one of them at most, never for ``--details`` (Parquet). ``inputs`` maps each
    option (``--config_path``) to what it names (files, or folders: their traces and the files
    tracekit reads beside them), or is the command's arguments. ``written``: the folders the
    command writes into.
    """
    given = inputs if isinstance(inputs, Mapping) else {_ARGS: list(inputs)}
    named = _named(outputs)
    for folder in written:
        _check_written(folder, named, given)
    if not named:
        return
    protected = _inputs(given)
    for option, path in named:
        what = next((protected[k] for k in _keys(path) if k in protected), None)
        if what is not None:
            raise InputError(
                f"{option} names {what}, which this command reads: it would be overwritten; "
                "write the report to another file",
                path=path,
            )


def _named(outputs: Mapping[str, Path | None]) -> list[tuple[str, Path]]:
    """The outputs given a file (not stdout), checked to be one stdout at most and distinct files."""
    piped = [option for option, path in outputs.items() if is_stdout(path)]
    if len(piped) > 1:
        raise InputError(f"{' and '.join(piped)} both write to stdout (-): give all but one of them a file")
    if "--details" in piped:
        raise InputError("--details -: the Parquet tables are written to a file, not to stdout")
    named = [(option, path) for option, path in outputs.items() if path is not None and not is_stdout(path)]
    seen: dict[_Key, str] = {}
    for option, path in named:
        keys = _keys(path)
        other = next((seen[k] for k in keys if k in seen), None)
        if other is not None:
            raise InputError(f"{other} and {option} name the same file: give each output its own file", path=path)
        seen.update(dict.fromkeys(keys, option))
    return named


def _check_written(folder: Written, named: list[tuple[str, Path]], given: Mapping[str, Iterable[Path | None]]) -> None:
    """No output among the files the command writes in ``folder``; no input there either."""
    for option, path in named:
        if _inside(path, folder):
            raise InputError(
                f"{option} names a file that {folder.flag} {folder.folder} is written with: it would be "
                "overwritten; write the report to another file",
                path=path,
            )
    for flag, paths in given.items():
        for path in (p for p in paths if p is not None):
            if _inside(path, folder):
                raise InputError(
                    f"{flag} {path} is inside {folder.flag} {folder.folder}, which this command writes: "
                    "it would be overwritten; move it elsewhere first",
                    path=path,
                )
