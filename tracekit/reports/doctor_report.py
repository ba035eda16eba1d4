"""The report of ``tracekit doctor`` as a document: what the measured fix gave against what was
predicted, then every stage (the verdict with its gains, the DataLoader's ceiling, the parameter
audit, the trials, the code changes). Its sentences are written here, once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tracekit.reports.document import Document, Head, Line, Section, Tone
from tracekit.reports.gains_table import waste_table
from tracekit.reports.gains_words import faster, worth
from tracekit.reports.tables import make_table, ms
from tracekit.reports.terms import phase_name
from tracekit.reports.tool_reports import audit_conclusion, loader_conclusion
from tracekit.reports.wording import NOTE_TITLES, TITLES
from tracekit.results.doctor import Agreement, SkipReason, StageStatus
from tracekit.results.vocab import Change

if TYPE_CHECKING:
    from tracekit.reports.document import Table
    from tracekit.results.doctor import CodeChange, Doctor, StageRun, Trial, TrialMeasure
    from tracekit.results.worth import Gain

__all__ = ["doctor_report"]

AGREEMENTS: Final = {
    Agreement.AS_PREDICTED: "as predicted (a gain beyond noise, its interval meets the predicted gain)",
    Agreement.PARTLY: "partly: a gain beyond noise, but not the predicted one",
    Agreement.INCONCLUSIVE: "inconclusive: the measured interval holds zero",
    Agreement.MISSED: "not as predicted (slower)",
    Agreement.IN_RANGE: "as predicted by doctor 1.0's rule (its interval met expected .. up to)",
    Agreement.NEAR_EXPECTED: "as predicted by doctor 1.0's rule (within 25% of expected)",
    Agreement.NO_PREDICTION: "no prediction (no finding's share)",
    Agreement.NOT_MEASURED: "not measured",
}
SKIPS: Final = {
    SkipReason.BUDGET: "skipped: its estimate did not fit in what was left of --budget (--resume runs it)",
    SkipReason.NO_BASELINE: "skipped: the baseline capture failed",
}
STAGE_NAMES: Final = {
    "capture": "baseline capture and its verdict",
    "loader": "DataLoader ceiling",
    "audit": "parameter audit",
}


def _gain(g: Gain | None) -> str:
    if g is None:
        return "-"
    gain = "not re-timed" if g.gain_pct is None else f"gain {g.gain_pct:.1f}%"
    return f"{gain} (share {g.share_pct:.1f}%)"


def _measured(m: TrialMeasure | None) -> str:
    if m is None:
        return "-"
    interval = "" if m.low_pct is None or m.high_pct is None else f" [{m.low_pct:.1f}%, {m.high_pct:.1f}%]"
    what = "less peak reserved memory" if m.key == "peak_reserved" else "faster step"
    return f"{m.gain_pct:.1f}%{interval} {what}"


def _finding(bound: object, note: object, memory: object = None) -> str:
    named = bound or note or memory
    return "-" if named is None else str(getattr(named, "value", named))


def _stage_row(s: StageRun) -> tuple[str, ...]:
    name = STAGE_NAMES.get(s.key, f"trial {s.key}")
    if s.status is StageStatus.SKIPPED:
        outcome = SKIPS[s.skip] if s.skip else "skipped"
    elif s.status is StageStatus.FAILED:
        outcome = f"failed: {s.reason}"
    else:
        outcome = s.folder or "-"
    return (name, s.status.value, f"{s.seconds:,.0f}", outcome)


def _trial_row(t: Trial) -> tuple[str, ...]:
    measured = _measured(t.measured) if t.run.status is StageStatus.OK else _stage_row(t.run)[3]
    agreement = AGREEMENTS[t.agreement] if t.agreement and t.run.status is StageStatus.OK else "-"
    after = "-" if t.after is None else _finding(t.after.bound, t.after.note)
    if t.after is not None and t.after.share_pct is not None:
        after += f" ({t.after.share_pct:.1f}%)"
    return (t.run.key, _finding(t.bound, t.note, t.memory), _gain(t.predicted), measured, agreement, after)


def _where(c: CodeChange) -> str:
    parts = []
    if c.op is not None:
        kind = "" if c.kind is None else f" ({c.kind.value.replace('_', ' ')})"
        per = "" if c.per_step is None else f", {c.per_step:g} per step per rank"
        parts.append(f"operator {c.op}{kind}{per}")
    if c.rank is not None:
        parts.append(f"rank {c.rank}")
    if c.phase is not None:
        parts.append(f"in phase {phase_name(c.phase)}")
    return "; ".join(parts) or "-"


def _trials_table(doctor: Doctor) -> Table:
    return make_table(
        "doctor_trials",
        "Knobs tried: the predicted gain against the measured one (A/B capture)",
        (
            "B: the baseline with",
            "addresses",
            "predicted: gain (share)",
            "measured gain [95%]",
            "agreement",
            "B's verdict",
        ),
        [_trial_row(t) for t in doctor.trials],
        f"Each knob's A/B ran the baseline config (A) and the config with the knob (B) interleaved, "
        f"{doctor.repeats} capture(s) of each; the measured gain is the step's change as a share of A's step "
        "(tracekit compare's interval of the difference of means). Predicted: the finding's gain in the baseline "
        "(gain: re-timed along the trace's dependencies, what removing it is worth; share: its part of the "
        "ledger, what the time is). As predicted only when the measured interval excludes zero and meets the "
        "predicted gain. A knob removes "
        "part of a waste, or all of it, or changes other work too: the measurement is the answer, and B's verdict "
        "says what bounds the run with the knob on.",
        numeric=(False, False, True, True, False, False),
        empty="no knob addresses the findings (or --trials 0)",
    )


def _code_table(doctor: Doctor) -> Table:
    return make_table(
        "doctor_code",
        "Findings that need a change of code",
        ("finding", "predicted: gain (share)", "where"),
        [(_finding(c.bound, c.note), _gain(c.gain), _where(c)) for c in doctor.code_changes],
        "No configuration knob removes these: each is worth its predicted gain once the code changes.",
        numeric=(False, True, False),
        empty="none",
    )


def _headline(doctor: Doctor) -> Line:
    measured = [t for t in doctor.trials if t.measured is not None and t.measured.key == "step"]
    best = max(measured, key=lambda t: t.measured.gain_pct if t.measured else 0.0, default=None)
    if best is not None and best.measured is not None and best.measured.change is Change.FASTER:
        m = best.measured
        predicted = "" if best.predicted is None else f"; predicted {_gain(best.predicted)}"
        return Line(
            f"{best.run.key}: the step is {m.gain_pct:.1f}% shorter ({ms(m.a)} -> {ms(m.b)} ms, "
            f"{faster(m.gain_pct)} as fast, measured){predicted}",
            Tone.GOOD,
        )
    if doctor.baseline is None:
        return Line("no baseline: the capture failed (see its stage below)", Tone.BAD)
    primary = doctor.baseline.verdict.primary
    title = TITLES.get(primary.bound) if primary.bound else NOTE_TITLES.get(primary.note) if primary.note else None
    tried = " No knob tried made the step faster beyond noise." if measured else ""
    return Line(f"{title or 'no verdict'}.{tried}", Tone.STRONG)


def _verdict_section(doctor: Doctor) -> Section | None:
    if doctor.baseline is None:
        return None
    b = doctor.baseline
    lines = []
    for f in [b.verdict.primary, *b.verdict.secondary]:
        name = _finding(f.bound, f.note)
        share = "" if f.share_pct is None else f" ({f.share_pct:.1f}% of the step)"
        lines.append(Line(f"{name}{share}", Tone.STRONG if f is b.verdict.primary else Tone.PLAIN))
        if f.gain is not None:
            lines.append(Line(worth(f.gain), Tone.DIM))
    step = "-" if b.step_mean_ns is None else f"{b.step_mean_ns / 1e6:,.2f} ms"
    rate = "" if b.samples_per_s is None else f", {b.samples_per_s:,.1f} samples/s"
    lines.insert(0, Line(f"baseline ({b.folder}, {b.device}): a step of {step}{rate}"))
    table = waste_table(b.verdict.gains)
    return Section(
        "doctor_verdict",
        "Verdict of the baseline, with what each fix is worth",
        "Verdict",
        tables=() if table is None else (table,),
        lines=tuple(lines),
    )


def doctor_report(doctor: Doctor) -> Document:
    """The report of ``tracekit doctor``."""
    sections = [
        Section(
            "doctor_stages",
            "What ran",
            "Stages",
            tables=(
                make_table(
                    "doctor_stages",
                    "Stages",
                    ("stage", "status", "seconds", "output (under the doctor's folder), or why not"),
                    [_stage_row(s) for s in (*doctor.stages, *(t.run for t in doctor.trials))],  # every run
                    "" if doctor.finished else "Interrupted: tracekit doctor --resume goes on from here.",
                    numeric=(False, False, True, False),
                ),
            ),
        )
    ]
    verdict = _verdict_section(doctor)
    if verdict is not None:
        sections.append(verdict)
    tools = []
    if doctor.loader is not None:
        tools.append(Line(loader_conclusion(doctor.loader), lead="DataLoader"))
    if doctor.audit is not None:
        tools.append(Line(audit_conclusion(doctor.audit), lead="Parameters"))
    if tools:
        sections.append(Section("doctor_tools", "DataLoader ceiling and parameter audit", "Input", lines=tuple(tools)))
    sections.append(Section("doctor_trials", "Knobs tried", "Trials", tables=(_trials_table(doctor),)))
    sections.append(Section("doctor_code", "Code changes", "Code", tables=(_code_table(doctor),)))
    head = Head(heading="tracekit doctor", headline=_headline(doctor))
    return Document("doctor", head, tuple(sections), source=doctor)
