"""One story per finding, in every format (issue 45): each finding's two numbers are called what
they are, its *share* (what the time is) and its *gain* (what removing it is worth), never "up
to", "at most" or "expected", which read as a bound that the other number can beat."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, analysis_of
from tracekit.reports import renderer
from tracekit.results.worth import Gain, GainLimit

pytestmark = pytest.mark.real

#: The words of a bound a share or gain is not.
BOUND_WORDS = re.compile(r"\b(?:up to|at most|expected)\b", re.IGNORECASE)


def _head(text: str, fmt: str) -> str:
    """The verdict and the table of gains of a report (other sections use "up to" for other things)."""
    if fmt == "terminal":
        verdict = text.split("\ntracekit analysis", maxsplit=1)[0]
        table = text[text.find("What removing each waste is worth") :].split("Facts", maxsplit=1)[0]
        return verdict + table
    if fmt == "md":
        return text.split("### Facts", maxsplit=1)[0]
    return (
        text[text.find('id="verdict"') : text.find("</section>", text.find('id="verdict"'))]
        + text[text.find("What removing each waste is worth") :][:20_000]
    )


@pytest.mark.parametrize("trace", ["tbplugin-resnet50-workers0", "param-dlrm-8rank-v100"])
@pytest.mark.parametrize("fmt", ["terminal", "md", "html"])
def test_every_format_says_share_and_gain(trace: str, fmt: str, kineto_dir: Path) -> None:
    analysis = analysis_of([kineto_dir / trace]).analysis
    text = renderer(fmt).render(analysis)
    head = " ".join(_head(text, fmt).split())
    assert "share" in head and "gain" in head
    assert not BOUND_WORDS.search(head), BOUND_WORDS.search(head)
    # a gain that differs from its share says why, in every format
    assert "why the gain is above the share" in head.lower() or "removed too" in head


def test_json_names_the_two_numbers(kineto_dir: Path) -> None:
    analysis = analysis_of([kineto_dir / "tbplugin-resnet50-workers0"]).analysis
    doc = json.loads(renderer("json").render(analysis))
    gains = doc["verdict"]["gains"]
    assert gains and all("share_pct" in g and "gain_pct" in g for g in gains)
    text = json.dumps(doc)
    assert "up_to_pct" not in text and "expected_pct" not in text
    launch = next(g for g in gains if g["bound"] == "launch-bound")
    assert launch["why"]["kind"] == "also_removes" and launch["why"]["other"] == "data-bound"
    assert doc["verdict"]["first"][0]["bound"] == "data-bound"
    assert doc["verdict"]["joint"]["bounds"] == ["data-bound", "launch-bound"]


def test_a_sample_s_doctor_record_reads_in_the_new_names() -> None:
    # doctor.json of schema 1.0 (written with up_to_pct / expected_pct) loads as 1.1
    from tracekit.results.doctor import load_doctor

    path = SAMPLES / "captures" / "cuda-h200-doctor" / "doctor.json"
    doctor = load_doctor(path.read_bytes(), source=str(path))
    gains = [t.predicted for t in doctor.trials if t.predicted is not None]
    assert gains and all(g.share_pct > 0 for g in gains)


def test_a_contended_capture_s_gains_are_floors() -> None:
    # samples/captures/straggler: 8 ranks on 2 cores (its summary says so): the time a fix frees
    # goes to the other ranks, which the re-timing does not give them, so every gain is a floor
    from tracekit.pipeline.analyze import AnalyzeOptions, analyze_paths

    analysis = analyze_paths([SAMPLES / "captures" / "straggler"], AnalyzeOptions(use_cache=False)).analysis
    retimed = [g for g in analysis.verdict.gains if g.gain_pct is not None]
    assert retimed and all(GainLimit.CORES_SHARED in g.limits for g in retimed)
    assert all(f.floor for f in analysis.verdict.first if f.gain_pct is not None)
    text = " ".join(renderer("terminal").render(analysis).split())
    assert "gain at least" in text and "a floor" in text


@pytest.mark.parametrize(
    ("gain", "limits", "weighed"),
    [
        (6.2, [GainLimit.CORES_SHARED], None),  # a floor under 15% rejects nothing: the share decides
        (37.4, [GainLimit.CORES_SHARED], 37.4),  # a floor over it: worth fixing, whatever the rest
        (6.2, [GainLimit.CPU_SHARED], 6.2),  # an estimate: under 15%, not the bound
        (None, [GainLimit.NOT_MODELED], None),
    ],
)
def test_the_verdict_weighs_a_floor_only_when_it_clears_the_bar(
    gain: float | None, limits: list[GainLimit], weighed: float | None
) -> None:
    from tracekit.analyzers.verdict_section import _decisive
    from tracekit.results.vocab import BoundKind

    g = Gain(bound=BoundKind.COMMS, step_ns=1e9, share_pct=49.1, gain_pct=gain, limits=limits)
    assert _decisive(g) == weighed
