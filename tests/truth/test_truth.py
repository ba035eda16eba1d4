"""tracekit against the labeled corpus (tests/truth/corpus.py): verdict, findings, key figures.

Every use of tracekit's API is inside :func:`_tracekit`, the one adapter: when the API changes,
only that function changes. The expectations in the corpus are not to be weakened to make a
case pass; a failing case is a tracekit bug (or a corpus error, to be argued in the corpus).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.truth import corpus
from tests.truth.corpus import CASES, Case

pytestmark = pytest.mark.real

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "captures"

#: idle causes that mean "the host was late" (launched after the gap began)
HOST_LATE_CAUSES = frozenset({"data", "host_sync", "blocking_collective", "one_time", "launch", "host_work"})


@dataclass(frozen=True)
class Observed:
    """What tracekit says about one case, in the corpus's vocabulary."""

    primary: str
    secondary: frozenset[str]
    #: figure name -> rank (None: the run, the mean over ranks) -> value
    figures: dict[str, dict[int | None, float]] = field(default_factory=dict)
    #: the candidates a "mixed" verdict could not tell apart
    components: frozenset[str] = frozenset()


def _tracekit(paths: list[Path]) -> Observed:
    """Run tracekit on ``paths`` and express its answer in the corpus's names (the only API use,
    with :func:`tests.conftest.analysis_of`: the analysis, shared with the other tests of the traces)."""
    import polars as pl

    from tests.conftest import analysis_of

    outcome = analysis_of(paths)
    a = outcome.frames
    verdict = outcome.analysis.verdict
    figs: dict[str, dict[int | None, float]] = defaultdict(dict)

    def put(name: str, frame: pl.DataFrame | None, column: str, scale: float = 1.0) -> None:
        if frame is None or frame.height == 0 or column not in frame.columns:
            return
        values = []
        for rank, value in frame.select("rank", column).iter_rows():
            if value is not None:
                figs[name][int(rank)] = float(value) * scale
                values.append(float(value) * scale)
        if values:
            figs[name][None] = statistics.mean(values)

    put(corpus.STEPS, a.steps.stats, "count")
    if a.facts.has_gpu:
        gpu = a.breakdown.per_rank
        put(corpus.COMPUTE, gpu, "compute_pct")
        put(corpus.COMM, gpu, "comm_pct")
        put(corpus.MEMORY, gpu, "memory_pct")
        put(corpus.IDLE, gpu, "idle_pct")
        put(corpus.DATALOADER_IDLE, a.dataloader.per_rank, "share_pct")
        if a.idle is not None and a.idle.per_rank.height:
            late = (
                a.idle.per_rank.filter(pl.col("cause").is_in(list(HOST_LATE_CAUSES)))
                .group_by("rank")
                .agg(pl.col("idle_ns").sum())
                .join(gpu.select("rank", "window_ns"), on="rank")
                .with_columns(host_late=100 * pl.col("idle_ns") / pl.col("window_ns"))
            )
            put(corpus.HOST_LATE, late, "host_late")
    if a.host_breakdown is not None:
        put(corpus.HOST_COMPUTE, a.host_breakdown.per_rank, "compute_pct")
        put(corpus.HOST_COMM, a.host_breakdown.per_rank, "comm_pct")
        put(corpus.HOST_DATA, a.dataloader.per_rank, "share_pct")
    put(corpus.SYNCS, a.syncs.per_rank, "per_step_calls")
    if a.stragglers.stragglers:
        top = max(a.stragglers.stragglers, key=lambda s: s.score)
        figs[corpus.STRAGGLER][None] = float(top.rank)
    put(corpus.STRAGGLER_LATE, a.stragglers.per_rank, "mean_lateness_ns", 1e-6)
    inst = a.collectives.per_rank
    if inst.height and "wait_ns" in inst.columns:
        put(corpus.MAX_WAIT, inst.group_by("rank").agg(pl.col("wait_ns").max()), "wait_ns", 1e-6)

    def kind(finding: object) -> str:
        bound, note = getattr(finding, "bound", None), getattr(finding, "note", None)
        return str((bound or note).value) if (bound or note) is not None else ""

    mixed = [b.value for b in verdict.primary.components]  # a mixed verdict names its candidates
    return Observed(
        primary=kind(verdict.primary),
        secondary=frozenset([kind(f) for f in verdict.secondary] + mixed),
        figures=dict(figs),
        components=frozenset(mixed),
    )


_SEEN: dict[str, Observed | BaseException] = {}


def _observe(case: Case, request: pytest.FixtureRequest) -> Observed:
    """tracekit's answer for ``case``, computed once per session (the shared traces via their fixture)."""
    if case.id not in _SEEN:
        base = request.getfixturevalue("shared_traces") if case.root == "shared" else SAMPLES
        try:
            _SEEN[case.id] = _tracekit([base / p for p in case.paths])
        except Exception as exc:  # reported by each test of the case
            _SEEN[case.id] = exc
    seen = _SEEN[case.id]
    if isinstance(seen, BaseException):
        pytest.fail(f"tracekit failed on {case.id}: {type(seen).__name__}: {seen}")
    return seen


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    return request.param


def _known_gap(case: Case, test: str, request: pytest.FixtureRequest) -> None:
    """Mark a documented gap of tracekit as a strict expected failure."""
    reason = dict(case.known_gaps).get(test)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))


def test_primary_verdict(case: Case, request: pytest.FixtureRequest) -> None:
    _known_gap(case, "primary", request)
    seen = _observe(case, request)
    accepted = (case.primary, *case.alternatives)
    # "mixed" is right when the candidates it could not separate include the expected verdict
    mixed_ok = seen.primary == "mixed" and case.primary in seen.components
    assert seen.primary in accepted or mixed_ok, (
        f"{case.id}: expected {' or '.join(accepted)} ({case.deciding}), got {seen.primary}"
    )


def test_secondary_findings(case: Case, request: pytest.FixtureRequest) -> None:
    _known_gap(case, "secondary", request)
    seen = _observe(case, request)
    present = {seen.primary, *seen.secondary}
    missing = [k for k in case.secondary if k not in present]
    assert not missing, f"{case.id}: findings {missing} missing; tracekit found {sorted(present)}"


def test_key_figures(case: Case, request: pytest.FixtureRequest) -> None:
    if not case.figures:
        pytest.skip(f"{case.id}: no figure an expert would check")
    _known_gap(case, "figures", request)
    seen = _observe(case, request)
    wrong = []
    for f in case.figures:
        where = "run" if f.rank is None else f"rank {f.rank}"
        got = seen.figures.get(f.name, {}).get(f.rank)
        if got is None:
            wrong.append(f"{f.name} ({where}, {f.window}): expected {f.value} in [{f.lo}, {f.hi}], not reported")
        elif not f.lo - 1e-9 <= got <= f.hi + 1e-9:
            wrong.append(f"{f.name} ({where}, {f.window}): expected {f.value} in [{f.lo:g}, {f.hi:g}], got {got:.3f}")
    assert not wrong, f"{case.id}:\n  " + "\n  ".join(wrong)
