"""Every case of the corpus, by group and by name."""

from __future__ import annotations

from tests.robustness import cases_cache, cases_files, cases_kineto, cases_names, cases_nsys, cases_summaries
from tests.robustness.harness import Case

GROUPS: dict[str, list[Case]] = {
    **cases_kineto.GROUPS,
    **cases_names.GROUPS,
    **cases_files.GROUPS,
    **cases_nsys.GROUPS,
    **cases_cache.GROUPS,
    **cases_summaries.GROUPS,
}
CASES: tuple[Case, ...] = tuple(c for cases in GROUPS.values() for c in cases)
BY_NAME: dict[str, Case] = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES), "two cases share a name"
