"""tracekit's parse alone: the files read into the event schema, cold, on every core.

``tracekit.readers.load_run`` with no cache: a large Kineto file is cut into chunks decoded
in one process per core (``--jobs`` of ``tracekit analyze``), and the events come back as
the columns the analyses read, with the allocator setting of the ``tracekit`` command
(:mod:`tracekit.cli`). Nothing is analyzed. The counterpart of ``floor.py`` (one
process, the events as Python objects), for the parse of one big file on every core. Prints
``{"seconds": ..., "events": ..., "ranks": ...}`` as JSON.
"""

from __future__ import annotations

import json
import sys
import time


def main(paths: list[str]) -> None:
    """Read every trace of ``paths`` (files or folders)."""
    began = time.perf_counter()
    import tracekit.cli  # noqa: F401, PLC0415 (first: the command's allocator setting, as `tracekit analyze` has it)
    from tracekit.readers import load_run  # noqa: PLC0415 (its import is part of the parse)

    run = load_run(paths, use_cache=False)
    events = run.events.height
    print(json.dumps({"seconds": time.perf_counter() - began, "events": events, "ranks": len(run.rank_ids)}))


if __name__ == "__main__":
    main(sys.argv[1:])
