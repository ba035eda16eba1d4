"""The ``tracekit`` command line (:mod:`tracekit.cli.main`).

Importing this package, before anything loads polars, sets how polars' allocator (jemalloc)
gives freed memory back, for this process and the processes it starts (:data:`ALLOCATOR`),
unless the environment already says (``_RJEM_MALLOC_CONF``, which polars reads when it
loads, after its own defaults: a later option wins). Polars' defaults keep freed pages for
half a second, then only mark them free (``MADV_FREE``) for a second more, still counted as
resident: reading and analyzing one 2 GB rank held 1.3 GB of memory where at most 0.86 GB
was live. Giving them back within a tenth of a second, from a background thread, keeps it
under 1 GB, at a cost of a few percent of the time (``benchmarks/results/``). A program that
imports polars before tracekit keeps its own settings.
"""

from __future__ import annotations

import os
from typing import Final

#: jemalloc's settings: purge freed pages within 100 ms, in a background thread, with no
#: lazy (``MADV_FREE``) stage between freed and returned.
ALLOCATOR: Final = "background_thread:true,dirty_decay_ms:100,muzzy_decay_ms:0"
#: The variable polars' jemalloc reads its settings from, once, when polars loads.
ALLOCATOR_VARIABLE: Final = "_RJEM_MALLOC_CONF"

os.environ.setdefault(ALLOCATOR_VARIABLE, ALLOCATOR)
# tracekit does no linear algebra: NumPy's OpenBLAS need not start a thread per core, whose
# spinning took CPU time from the decoding threads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
