"""Ranks from the user: the rank a file name claims, and ``--ranks`` specs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from tracekit.errors import InputError

_RANK_IN_NAME: Final = re.compile(r"(?:^|[^a-z])(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)
#: The largest rank the event schema holds (``rank`` is Int32).
MAX_RANK: Final = 2**31 - 1


def is_rank(value: object) -> bool:
    """Whether ``value`` can be a rank: an integer (not a bool) from 0 to :data:`MAX_RANK`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_RANK


def rank_from_name(path: str | Path) -> int | None:
    """The rank in a file name (``rank3``, ``rank-3``, ``rank_3``, ``worker3``), if any."""
    matches = _RANK_IN_NAME.findall(Path(path).name)
    return int(matches[-1]) if matches and is_rank(int(matches[-1])) else None


def parse_rank_spec(spec: str) -> set[int]:
    """Ranks from a spec such as ``0-3,7``; raises :class:`InputError` when malformed."""
    ranks: set[int] = set()
    for part in spec.split(","):
        item = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not match:
            raise InputError(f"--ranks: {item!r} is not a rank or a range like 0-3")
        low, high = int(match[1]), int(match[2] or match[1])
        if high > MAX_RANK:
            raise InputError(f"--ranks: {high} is beyond the largest rank ({MAX_RANK})")
        if high - low > 1_000_000:
            raise InputError(f"--ranks: range {item!r} spans more than a million ranks")
        if high < low:
            raise InputError(f"--ranks: range {item!r} runs backwards")
        ranks.update(range(low, high + 1))
    return ranks
