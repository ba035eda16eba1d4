"""The ``tracekit`` command line (:mod:`tracekit.cli.main`).

Importing this package, before anything loads polars, sets how polars' allocator (jemalloc)
gives freed memory back, for this process and the processes it starts (:data:`ALLOCATOR`),
unless the environment already says (``_RJEM_MALLOC_CONF``, which polars reads when it
loads, after its own defaults: a later option wins; polars' defaults alone, which a program
that imported polars leaves there for its children, say nothing). Polars' defaults keep
freed pages for half a second, then only mark them free (``MADV_FREE``) for a second more,
still counted as resident: reading and analyzing one 2 GB rank held 1.3 GB of memory where at
most 0.86 GB was live. Giving them back within a tenth of a second, from a background thread,
keeps it under 1 GB, at a cost of a few percent of the time (``benchmarks/results/``); fewer
arenas than jemalloc's four per core leave less freed memory stranded in arenas no thread
allocates from next. A program that imports polars before tracekit keeps its own settings.
"""

from __future__ import annotations

import os
from typing import Final

from tracekit.heap import DIRTY_DECAY_MS

#: Cores per jemalloc arena. jemalloc's default, four arenas per core, spreads polars'
#: threads so that memory one freed is rarely what another allocates: on 2 cores one arena
#: held 8 x 125 MB's cold peak 30 MB lower on average (471 to 522 MB, mean 499, against 513
#: to 548, mean 529; 10 runs each in turns, ``benchmarks.run.measure``), at the same time,
#: and changed nothing measurable on 1,024 x 3 MB, a warm run or one 2 GB rank. One arena for
#: every four cores keeps the contention of many threads on an arena's locks (what jemalloc's
#: arenas are for) bounded on larger machines.
CORES_PER_ARENA: Final = 4
#: jemalloc's settings: purge freed pages within 100 ms, in a background thread, with no
#: lazy (``MADV_FREE``) stage between freed and returned; an arena per :data:`CORES_PER_ARENA`.
ALLOCATOR: Final = (
    f"background_thread:true,dirty_decay_ms:{DIRTY_DECAY_MS},muzzy_decay_ms:0,"
    f"narenas:{max(1, (os.cpu_count() or 1) // CORES_PER_ARENA)}"
)
#: The variable polars' jemalloc reads its settings from, once, when polars loads.
ALLOCATOR_VARIABLE: Final = "_RJEM_MALLOC_CONF"
#: What importing polars writes to :data:`ALLOCATOR_VARIABLE` where it was not set (its own
#: defaults; ``POLARS_THP=1`` adds transparent huge pages): every process a polars program
#: starts inherits it. It is no setting of the user's, so the command still sets its own after
#: it (``tests/cli/test_allocator.py`` fails if polars' defaults change). Before, a ``tracekit``
#: started by a Python program that had imported polars ran on polars' defaults: the
#: benchmarks' own harness, whose runs of record read 8 x 125 MB's cold peak 80 to 120 MB
#: higher than the same command from a shell (626 against 503 MB).
POLARS_DEFAULTS: Final = ("dirty_decay_ms:500,muzzy_decay_ms:1000", "thp:always,metadata_thp:always")


def _allocator(inherited: str | None) -> str:
    """The allocator's settings for this process and those it starts: the environment's where
    it says something (a later option wins in jemalloc), else :data:`ALLOCATOR`."""
    defaults, huge = POLARS_DEFAULTS
    if not inherited:
        return ALLOCATOR
    if inherited in (defaults, f"{defaults},{huge}"):  # only a polars process's defaults
        return f"{inherited},{ALLOCATOR}"
    return inherited


os.environ[ALLOCATOR_VARIABLE] = _allocator(os.environ.get(ALLOCATOR_VARIABLE))
# tracekit does no linear algebra: NumPy's OpenBLAS need not start a thread per core, whose
# spinning took CPU time from the decoding threads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
