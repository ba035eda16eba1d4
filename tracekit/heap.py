"""Giving the C heap's free pages back to the system, where the C library can (glibc)."""

from __future__ import annotations

import ctypes
import functools
from typing import Any


def trim_heap() -> None:
    """Return the free pages of the C heap to the system (glibc's ``malloc_trim``; elsewhere nothing).

    glibc serves blocks of up to 32 MiB from its heap once a block that size was freed, and
    keeps the heap's free pages resident: after a file is read in chunks (their text, and the
    native decoder's arrays, freed in worker threads), tens of MB of freed memory would stay
    resident through the analyses that follow.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
