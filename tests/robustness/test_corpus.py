"""Every malformed input of the corpus through ``tracekit analyze``: alone, and mixed among good ranks.

The cases are in ``cases_*.py`` (what each builds, and the outcomes it may have); the checks in
``harness.judge``: the exit code, one line on stderr naming the file for an error, no
traceback, no hang, a skip or warning named in the JSON, the terminal output and the Markdown,
and the good ranks' per-rank numbers identical to a clean run of them alone. Runs that fail
today are strict expected failures (``known_failures.py``, described in FAILURES.md).

``TRACEKIT_ROBUSTNESS_LOG=FILE`` appends what each run observed to FILE (JSON lines), from
which ``python -m tests.robustness.report FILE`` writes FAILURES.md and the known failures.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import pytest

from tests.robustness.corpus import CASES
from tests.robustness.harness import Case, Mode, judge, observe
from tests.robustness.known_failures import KNOWN
from tests.robustness.runner import analyze
from tests.robustness.sources import FAMILIES, SOURCES

if TYPE_CHECKING:
    from pathlib import Path

    from _pytest.mark.structures import ParameterSet

    from tests.robustness.conftest import Clean


def _id(case: Case, mode: Mode) -> str:
    return f"{case.name}-{mode}"


def _real(case: Case, mode: Mode) -> bool:
    family = FAMILIES.get(case.mixed_family or "") if mode == "mixed" else None
    good_real = family is not None and SOURCES[family.source].real
    return SOURCES[case.source].real or good_real


def _params() -> list[ParameterSet]:
    params = []
    for case in CASES:
        for mode in case.modes():
            marks: list[pytest.MarkDecorator] = []
            if _real(case, mode):
                marks.append(pytest.mark.real)
            if (reason := KNOWN.get(_id(case, mode))) is not None:
                marks.append(pytest.mark.xfail(strict=True, reason=reason))
            params.append(pytest.param(case, mode, id=_id(case, mode), marks=marks))
    return params


@pytest.mark.e2e  # 470 runs of tracekit analyze: minutes, so outside the fast lane (CI runs it)
@pytest.mark.concurrent  # each one command: shared among the xdist workers
@pytest.mark.parametrize(("case", "mode"), _params())
def test_corpus(case: Case, mode: Mode, tmp_path: Path, clean: Clean, request: pytest.FixtureRequest) -> None:
    if _real(case, mode):
        request.getfixturevalue("shared_traces")  # skips (fails in CI) without ../shared/traces
    if case.skip_reason is not None and (why := case.skip_reason()) is not None:
        pytest.skip(why)
    source = SOURCES[case.source]
    baseline = full = None
    good: set[int] | None = None
    if mode == "alone":
        folder = tmp_path / "alone"
        folder.mkdir()
        bad = case.build(folder, source)
        paths: list[Path] = [] if case.procsub else [bad]
        full = clean.alone(source)
    else:
        family = FAMILIES[case.mixed_family or ""]
        folder = clean.good_folder(family, tmp_path / "mixed")
        where = tmp_path / "extra" if case.as_arg else folder
        where.mkdir(exist_ok=True)
        bad = case.build(where, source)
        paths = [folder] if case.procsub or not case.as_arg else [folder, bad]
        baseline, good = clean.good(family), set(family.good_ranks)
        full = clean.full(family) if family.source == source.key else None
    cache = clean.cache if mode == "mixed" else None
    if case.damage is not None:
        cache = tmp_path / "cache"
        first = analyze(paths, tmp_path / "first", cache_dir=cache)
        assert first.code == 0, f"the run that fills the cache failed: {first.stderr}"
        case.damage(cache)
    procsub = f"<(cat '{bad}')" if case.procsub else None
    out = analyze(
        paths,
        tmp_path / "out",
        process=case.process,
        shell_paths=procsub,
        cache_dir=cache,
        md=True,
        html=case.html,
    )
    marker = case.marker or bad.name
    problems = judge(case, mode, out, marker, baseline=baseline, clean=full, source_rank=source.rank, good=good)
    _log(case, mode, observe(out, marker), problems.items, out.seconds)
    assert not problems, f"{case.name} ({mode}):\n  " + "\n  ".join(problems.items)


def _log(case: Case, mode: Mode, seen: str, problems: list[str], seconds: float) -> None:
    target = os.environ.get("TRACEKIT_ROBUSTNESS_LOG")
    if not target:
        return
    row: dict[str, object] = {"id": _id(case, mode), "case": case.name, "mode": mode, "seen": seen}
    row["problems"] = problems
    row |= {"expect": sorted(case.expected(mode)), "seconds": round(seconds, 3)}
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


def test_corpus_size() -> None:
    """The corpus holds at least 100 malformed inputs, and the README and docs/index.md say how
    many inputs and runs it has (issue 46: they said 470 and 436 of one corpus)."""
    import re
    from pathlib import Path

    assert len(CASES) >= 100
    root = Path(__file__).resolve().parents[2]
    runs = len(_params())
    readme = " ".join((root / "README.md").read_text().split())
    index = " ".join((root / "docs" / "index.md").read_text().split())
    assert re.findall(r"the (\d+) runs of the robustness corpus", readme) == [str(runs)]
    assert re.findall(r"builds (\d+) malformed inputs", index) == [str(len(CASES))]
    assert re.findall(r"mixed among good ranks: (\d+) runs", index) == [str(runs)]
