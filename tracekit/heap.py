"""Giving the C heap's free pages back to the system, where the C library can (glibc)."""

from __future__ import annotations

import ctypes
import functools
import time
from typing import Any, Final

#: How long polars' allocator (jemalloc) keeps freed pages before its background thread gives
#: them back (``dirty_decay_ms`` of :data:`tracekit.cli.ALLOCATOR`, which reads this).
DIRTY_DECAY_MS: Final = 100


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


def given_back() -> None:
    """After a large free (a spilled rank's held events, hundreds of MB): the C heap trimmed
    (:func:`trim_heap`), then the allocator's decay waited out (twice :data:`DIRTY_DECAY_MS`), so
    that its freed pages are returned before the next stage allocates. Without the wait the 2 GB
    DLRM rank's first window (its GPU activity joined to its launches) began while the held run's
    pages were still resident: 526 and 564 MB in two runs, against a live peak of 483 (the pages
    given back at once); with it, that step no longer sets the peak. 0.2 s for a rank analysed
    in 25."""
    trim_heap()
    time.sleep(2 * DIRTY_DECAY_MS / 1000)
