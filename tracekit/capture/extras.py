"""The optional dependencies of the capture commands (the ``capture`` extra), checked before
anything starts: a missing one is one line naming the extra to install, not a traceback from
a rank or the launcher's ``No module named torch``."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Final

from tracekit.errors import MissingDependency

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["CAPTURE_MODULES", "missing", "require_capture"]

#: What every capture-like command imports: torch in the ranks, accelerate to launch them.
CAPTURE_MODULES: Final = ("torch", "accelerate")
#: How torch itself is best installed: first, for the machine's CUDA (the extra's torch is PyPI's default build).
TORCH_NOTE: Final = " (install torch first: torch==2.13.0, or the build for your CUDA from pytorch.org)"


def missing(modules: Iterable[str]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here (found by name, not imported)."""
    gone = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder that refuses it, or a module without a spec
            found = False
        if not found:
            gone.append(name)
    return gone


def require_capture(what: str, *, nvtx: bool = False) -> None:
    """Raise :class:`~tracekit.errors.MissingDependency` naming ``what`` (``tracekit capture``)
    when a module of the ``capture`` extra is missing; ``nvtx``: also the ``nvtx`` package (its
    ranges are what Nsight Systems shows; without ``--nsys`` they are optional)."""
    gone = missing((*CAPTURE_MODULES, *(["nvtx"] if nvtx else [])))
    if gone:
        raise MissingDependency(what, gone, "capture", note=TORCH_NOTE if "torch" in gone else "")
