"""The ``tracekit`` command line (:mod:`tracekit.cli.main`).

Importing this package, before anything loads polars, sets how polars' allocator (jemalloc)
gives freed memory back, for this process and the processes it starts (:data:`ALLOCATOR`),
unless the environment already says (``_RJEM_MALLOC_CONF``, which polars reads when it
loads, after its own defaults: a later option wins). Polars' defaults keep freed pages for
half a second, then only mark them free (``MADV_FREE``) for a second more, still counted as
resident: reading and analyzing one 2 GB rank held 1.3 GB of memory where at most 0.86 GB
was live. Giving them back within a tenth of a second, from a background thread, keeps it
under 1 GB, at a cost of a few percent of the time (``benchmarks/results/``); fewer arenas than
jemalloc's four per core leave less freed memory stranded in arenas no thread allocates from
next. A program that imports polars before tracekit keeps its own settings.
"""

from __future__ import annotations

import os
from typing import Final

#: Threads per jemalloc arena. jemalloc's default, four arenas per core, spreads polars'
#: threads so that memory one freed is rarely what another allocates: on 2 cores one arena
#: held 8 x 125 MB's cold peak 10 to 40 MB lower (471 to 507 MB against 513 to 548, 10 runs
#: each in turns, ``benchmarks.run.measure``), at the same time, and changed nothing
#: measurable on 1,024 x 3 MB, a warm run or one 2 GB rank. One arena for every four cores keeps the contention of many
#: threads on an arena's locks (what jemalloc's arenas are for) bounded on larger machines.
CORES_PER_ARENA: Final = 4
#: jemalloc's settings: purge freed pages within 100 ms, in a background thread, with no
#: lazy (``MADV_FREE``) stage between freed and returned; an arena per :data:`CORES_PER_ARENA`.
ALLOCATOR: Final = (
    "background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0,"
    f"narenas:{max(1, (os.cpu_count() or 1) // CORES_PER_ARENA)}"
)
#: The variable polars' jemalloc reads its settings from, once, when polars loads.
ALLOCATOR_VARIABLE: Final = "_RJEM_MALLOC_CONF"

os.environ.setdefault(ALLOCATOR_VARIABLE, ALLOCATOR)
# tracekit does no linear algebra: NumPy's OpenBLAS need not start a thread per core, whose
# spinning took CPU time from the decoding threads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
