"""Ranks from the user: the rank a file name claims, and ``--ranks`` specs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from tracekit.errors import InputError

_RANK_IN_NAME: Final = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


def rank_from_name(path: str | Path) -> int | None:
    """The rank in a file name (``rank3``, ``rank-3``, ``rank_3``, ``worker3``), if any."""
    matches = _RANK_IN_NAME.findall(Path(path).name)
    return int(matches[-1]) if matches else None


def parse_rank_spec(spec: str) -> set[int]:
    """Ranks from a spec such as ``0-3,7``; raises :class:`InputError` when malformed."""
    ranks: set[int] = set()
    for part in spec.split(","):
        item = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not match:
            raise InputError(f"--ranks: {item!r} is not a rank or a range like 0-3")
        low, high = int(match[1]), int(match[2] or match[1])
        if high < low:
            raise InputError(f"--ranks: range {item!r} runs backwards")
        ranks.update(range(low, high + 1))
    return ranks
