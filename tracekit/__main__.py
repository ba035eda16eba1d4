"""``python -m tracekit``: the same as the ``tracekit`` command."""

from __future__ import annotations

from tracekit.cli.main import main

if __name__ == "__main__":
    main()
