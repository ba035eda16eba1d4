"""Summary statistics in plain Python, for code that must not import polars (capture).

The analyzers compute the same figures as polars expressions
(:func:`tracekit.analyzers.stats.summary_exprs`); these functions agree with them (the mean to floating-point rounding):

- ``mean``: the arithmetic mean.
- ``median``: the middle value, or the mean of the two middle values of an even count.
- ``p95``: the 95th percentile by the *higher* rule, polars'
  ``quantile(0.95, interpolation="higher")`` and numpy's ``method="higher"``: sort the ``n``
  values, compute the position ``0.95 * (n - 1)`` (0-based) and take the value at that position
  rounded up. It is always one of the values, never an interpolation between two. For 20
  values it is the largest; for 40, the second largest. (The textbook nearest-rank rule,
  position ``ceil(0.95 * n) - 1``, gives one value lower for some counts: 20 values give the
  second largest. The analyzers' rule won, so capture and analysis figures agree.)

Every function raises :class:`ValueError` for no values.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["mean", "median", "p95", "quantile_higher"]


def _checked(values: Sequence[float], what: str) -> None:
    if not values:
        raise ValueError(f"{what} of no values")


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean."""
    _checked(values, "mean")
    return math.fsum(values) / len(values)


def median(values: Sequence[float]) -> float:
    """The middle value; the mean of the two middle values for an even count."""
    _checked(values, "median")
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2


def quantile_higher(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 <= q <= 1) by the higher rule: the value at ``ceil(q * (n - 1))``.

    Computed with the same floating-point steps as polars, so the position rounds the same way.
    """
    _checked(values, "quantile")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is not between 0 and 1")
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, math.ceil((len(ordered) - 1.0) * q))])


def p95(values: Sequence[float]) -> float:
    """The 95th percentile by the higher rule (see the module docstring)."""
    return quantile_higher(values, 0.95)
