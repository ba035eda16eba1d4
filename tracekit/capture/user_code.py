"""Calling the user's code (a workload's dataset, model, loss): its failure named at its own line.

An exception from the user's code is bad input, not a bug in tracekit: :func:`user_code`
turns it into one :class:`~tracekit.errors.InputError` (exit 2) that names the innermost frame
of the traceback in the user's own files (not tracekit's, not the standard library's, not an
installed package's). Where no such frame exists (a dataset that is not one fails inside
torch's sampler; a loss without gradients fails inside autograd), the place where the object
to blame was defined is named instead: its class or function.
"""

from __future__ import annotations

import contextlib
import inspect
import sysconfig
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import InputError, TracekitError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["defined_at", "user_code", "user_frame"]

_TRACEKIT = Path(__file__).resolve().parents[1]


def _library_roots() -> tuple[Path, ...]:
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    return tuple(Path(p).resolve() for p in {sysconfig.get_paths().get(n) for n in names} if p)


def _is_users(filename: str) -> bool:
    if filename.startswith("<"):  # <frozen runpy>, <string>
        return False
    path = Path(filename).resolve()
    return not any(path.is_relative_to(root) for root in (_TRACEKIT, *_library_roots()))


def user_frame(exc: BaseException) -> str | None:
    """``file:line`` of the innermost frame of ``exc``'s traceback in the user's own code."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if _is_users(frame.filename):
            return f"{frame.filename}:{frame.lineno}"
    return None


def defined_at(obj: object) -> str | None:
    """``file:line`` where ``obj``'s function or class (the class of an instance) is defined."""
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj) else type(obj)
    with contextlib.suppress(TypeError, OSError):
        filename = inspect.getsourcefile(target)
        if filename is not None and _is_users(filename):
            return f"{filename}:{inspect.getsourcelines(target)[1]}"
    return None


@contextlib.contextmanager
def user_code(what: str, *, blame: Sequence[object] = ()) -> Iterator[None]:
    """Run the user's code: an exception from it is an :class:`InputError` saying ``what`` failed
    (``workload 'm:f': its dataset``), the error, and the user's file and line: the innermost
    frame of the user's code in the traceback, else where the first of ``blame`` (the dataset,
    then the factory that returned it) that the user defined is defined."""
    try:
        yield
    except TracekitError:
        raise
    except Exception as exc:
        where = user_frame(exc) or next(filter(None, map(defined_at, blame)), None)
        detail = " ".join(str(exc).split())
        raise InputError(f"{what} raised {type(exc).__name__}{': ' + detail if detail else ''}", path=where) from exc
