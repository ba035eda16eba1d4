"""The typed result model: every number a report shows, as msgspec Structs and enums.

Analyzers produce these; renderers read only these. They round-trip through JSON
(:func:`tracekit.results.io.load_analysis`), so saved analyses can be rendered again and
compared without the traces.
"""

from __future__ import annotations
