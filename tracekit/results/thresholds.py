"""Thresholds shared by capture (no polars) and the analyzers, defined once."""

from __future__ import annotations

from typing import Final

#: A rank is a straggler when the others' waiting it causes is at least this share of a step.
STRAGGLER_MIN_SHARE: Final = 0.05
