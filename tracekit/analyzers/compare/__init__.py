"""Compare two runs: typed analyses in, a typed :class:`~tracekit.results.compare.Comparison` out.

One module per concern: :mod:`.noise` (per-step samples, the block bootstrap, a measure's change
and interval), :mod:`.samples` (what is read from one analysis), :mod:`.measures` (the measures
of a comparison), :mod:`.work_changes` (work and syncs matched by name), :mod:`.sides` (what each
side is and how the sides differ), :mod:`.comparison` (:func:`compare`) and :mod:`.gate` (the CI
gate: ``--fail-if`` read and decided).
"""

from __future__ import annotations

from tracekit.analyzers.compare.comparison import compare
from tracekit.analyzers.compare.gate import GATE_HELP, GateSpec, evaluate_gate, parse_gate
from tracekit.analyzers.compare.noise import Noise, compare_values

__all__ = ["GATE_HELP", "GateSpec", "Noise", "compare", "compare_values", "evaluate_gate", "parse_gate"]
